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
// name (function, method of an exported type, type, constant, variable,
// field of an exported struct type) has a doc comment, as go doc shows
// them to a new user.
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
				for _, u := range undocumented(d) {
					t.Errorf("%s: %s has no doc comment", fset.Position(u.pos), u.name)
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

// name is a declared name and where it is declared.
type name struct {
	pos  token.Pos
	name string
}

// undocumented returns the exported names d declares without a doc comment.
func undocumented(d ast.Decl) []name {
	var out []name
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Doc == nil && d.Name.IsExported() && exportedRecv(d.Recv) {
			out = append(out, name{d.Pos(), d.Name.Name})
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if !s.Name.IsExported() {
					continue
				}
				if d.Doc == nil && s.Doc == nil {
					out = append(out, name{s.Pos(), s.Name.Name})
				}
				if st, ok := s.Type.(*ast.StructType); ok {
					out = append(out, undocumentedFields(s.Name.Name, st)...)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
						out = append(out, name{n.Pos(), n.Name})
					}
				}
			}
		}
	}
	return out
}

// undocumentedFields returns the exported fields of struct st, named
// within.Field, that have neither a comment above them nor one at the end
// of their line: go doc pkg.Type.Field, and an editor's hover, show a
// field's own comment only, not one above a group of fields. The fields
// of a struct type written inline as a field's type are checked too.
func undocumentedFields(within string, st *ast.StructType) []name {
	var out []name
	for _, f := range st.Fields.List {
		var names []string
		for _, n := range f.Names {
			if n.IsExported() {
				names = append(names, n.Name)
			}
		}
		if id := embedded(f); id != nil && id.IsExported() {
			names = append(names, id.Name)
		}
		if f.Doc == nil && f.Comment == nil {
			for _, n := range names {
				out = append(out, name{f.Pos(), within + "." + n})
			}
		}
		if inner, ok := f.Type.(*ast.StructType); ok && len(names) > 0 {
			out = append(out, undocumentedFields(within+"."+names[0], inner)...)
		}
	}
	return out
}

// embedded returns the type name of an embedded field (T, *T, pkg.T,
// T[P]), nil for a named one.
func embedded(f *ast.Field) *ast.Ident {
	if len(f.Names) != 0 {
		return nil
	}
	t := f.Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	switch x := t.(type) {
	case *ast.Ident:
		return x
	case *ast.SelectorExpr:
		return x.Sel
	}
	return nil
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
