package main

import (
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

var readmeCommandName = regexp.MustCompile("`([a-z -]+)`")

// TestReadmeCommandTable checks that README.md's command table and the
// command's package documentation name every command fencedq runs, and
// nothing else.
func TestReadmeCommandTable(t *testing.T) {
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n| command | does |\n|---|---|\n")
	if !ok {
		t.Fatal("README.md has no command table")
	}
	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(row, "|")
		if len(cells) < 3 {
			t.Fatalf("malformed row %q", row)
		}
		for _, m := range readmeCommandName.FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	known := map[string]bool{}
	for _, c := range commands {
		known[c.name] = true
		if !listed[c.name] {
			t.Errorf("README's command table lacks %q", c.name)
		}
		if !regexp.MustCompile(`(?m)^\s*fencedq ` + regexp.QuoteMeta(c.name) + `\s`).MatchString(doc) {
			t.Errorf("the package documentation's command list lacks %q", c.name)
		}
	}
	for name := range listed {
		if !known[name] {
			t.Errorf("README's command table lists %q, which fencedq does not run", name)
		}
	}
}
