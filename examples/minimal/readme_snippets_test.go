package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSnippets are the README sections whose Go snippet is the code a
// new user copies first: each must compile against this checkout.
var readmeSnippets = []string{"## Use it in your module", "## Writing a handler"}

// TestReadmeQuickStartSnippetsCompile builds each snippet of
// readmeSnippets as a program (its type and method declarations at the top
// level, its statements in main, with ctx, rdb and ns defined as the text
// around it assumes), so a renamed or changed API cannot leave the
// README's first code behind. Unused variables and imports are allowed (a
// snippet stops where the reader takes over).
func TestReadmeQuickStartSnippetsCompile(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command in PATH to build the README's snippets: %v", err)
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	dir, err := filepath.Abs("readmesnippet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s exists: the test builds its snippets there through an overlay", dir)
	}
	for _, section := range readmeSnippets {
		t.Run(strings.TrimPrefix(section, "## "), func(t *testing.T) {
			_, after, ok := strings.Cut(readme, "\n"+section+"\n")
			if !ok {
				t.Fatalf("README.md has no section %q", section)
			}
			_, code, ok := strings.Cut(after, "\n```go\n")
			if ok {
				code, _, ok = strings.Cut(code, "\n```\n")
			}
			if !ok {
				t.Fatalf("README.md's section %q has no Go snippet", section)
			}
			src := program(code)
			file := filepath.Join(t.TempDir(), "main.go")
			overlay := filepath.Join(t.TempDir(), "overlay.json")
			if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			spec, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "main.go"): file}})
			if err := os.WriteFile(overlay, spec, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "build", "-overlay", overlay, "-o", os.DevNull, "./readmesnippet")
			cmd.Env = append(os.Environ(), "GOPROXY=off") // the checkout's own requirements only
			out, _ := cmd.CombinedOutput()
			if errs := realErrors(string(out)); len(errs) > 0 {
				t.Errorf("README's snippet under %q does not compile:\n%s\nprogram:\n%s", section, strings.Join(errs, "\n"), src)
			}
		})
	}
}

// program makes a main package of a README snippet.
func program(code string) string {
	var decls, stmts []string
	lines := strings.Split(code, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "type ") || strings.HasPrefix(l, "func ") {
			decl := []string{l}
			if strings.HasSuffix(l, "{") {
				for i++; i < len(lines); i++ {
					decl = append(decl, lines[i])
					if lines[i] == "}" {
						break
					}
				}
			}
			decls = append(decls, decl...)
			continue
		}
		stmts = append(stmts, "\t"+l)
	}
	return fmt.Sprintf(`package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

%s

func main() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	ns := "readme"
%s
}
`, strings.Join(decls, "\n"), strings.Join(stmts, "\n"))
}

// allowed are the compiler's complaints a snippet may cause: it stops where
// the reader takes over, leaving variables and imports unused.
var allowed = regexp.MustCompile(`declared and not used|imported and not used|^#|too many errors`)

// realErrors returns the lines of go build's output that are not allowed.
func realErrors(out string) []string {
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !allowed.MatchString(l) {
			errs = append(errs, l)
		}
	}
	return errs
}
