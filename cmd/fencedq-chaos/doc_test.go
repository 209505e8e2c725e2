package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestPackageDocListsEveryFlag: RELIABILITY.md sends readers to the
// package documentation for what each flag does, so its usage list names
// every flag the command takes.
func TestPackageDocListsEveryFlag(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	var names []string
	var help strings.Builder
	if _, err := parseOptions([]string{"--help"}, &help); err != errHelp {
		t.Fatalf("--help: %v", err)
	}
	for _, line := range strings.Split(help.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(line, "  -") {
			names = append(names, strings.TrimPrefix(f[0], "-"))
		}
	}
	if len(names) < 10 {
		t.Fatalf("read %d flags from --help: %q", len(names), help.String())
	}
	for _, n := range names {
		if !strings.Contains(doc, "--"+n+" ") && !strings.Contains(doc, "--"+n+"\n") && !strings.Contains(doc, "--"+n+",") {
			t.Errorf("the package documentation does not list --%s", n)
		}
	}
}
