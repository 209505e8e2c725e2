package apidoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// public are the directories of the packages an application imports.
var public = []string{
	"jobs", "worker", "workflow", "lease",
	"fence", "fence/pgfence", "fence/redisfence", "fence/httpfence",
	"dashboard", "asynqfence", "fencedqtest", "otelfencedq",
}

// TestPublicPackagesDocumented: each public package's doc says what it is
// for and shows its common call (an indented code line), and every exported
// name (function, method of an exported type, type, constant, variable)
// has a doc comment, as go doc shows them to a new user.
func TestPublicPackagesDocumented(t *testing.T) {
	for _, dir := range public {
		path := filepath.Join("..", "..", dir)
		entries, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		var docs []string
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(path, e.Name()), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc != nil {
				docs = append(docs, f.Doc.Text())
			}
			for _, d := range f.Decls {
				for _, name := range undocumented(d) {
					t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), name)
				}
			}
		}
		switch {
		case len(docs) != 1:
			t.Errorf("%s: %d package doc comments, want 1", dir, len(docs))
		case !strings.Contains(docs[0], "\n\t"):
			t.Errorf("%s: the package doc shows no call (an indented code line)", dir)
		}
	}
}

// undocumented returns the exported names d declares without a doc comment.
func undocumented(d ast.Decl) []string {
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Doc == nil && d.Name.IsExported() && exportedRecv(d.Recv) {
			out = append(out, d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
					out = append(out, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
						out = append(out, n.Name)
					}
				}
			}
		}
	}
	return out
}

// exportedRecv reports whether a method's receiver type is exported (true
// for a function).
func exportedRecv(recv *ast.FieldList) bool {
	if recv == nil {
		return true
	}
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
