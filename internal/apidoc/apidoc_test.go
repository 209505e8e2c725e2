package apidoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
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

// listed are public aliases of internal struct types whose doc lists the
// fields: go doc shows an alias without its fields, and the aliased type
// lives where a user cannot import it.
var listed = []struct{ dir, alias, target, typ string }{
	{"jobs", "Record", "internal/ledger", "Record"},
}

// TestAliasDocsListFields: the doc of each listed alias names every
// exported field of the type it aliases, and does not send the reader
// into internal/ for them.
func TestAliasDocsListFields(t *testing.T) {
	for _, l := range listed {
		doc := typeDoc(t, l.dir, l.alias)
		if doc == nil {
			t.Errorf("%s: no type %s", l.dir, l.alias)
			continue
		}
		text := doc.Text()
		if strings.Contains(text, "internal/") {
			t.Errorf("%s.%s: the doc points into internal/ instead of listing the fields", l.dir, l.alias)
		}
		words := map[string]bool{}
		for _, w := range strings.FieldsFunc(text, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
		}) {
			words[w] = true
		}
		st := structType(t, l.target, l.typ)
		if st == nil {
			t.Fatalf("%s: no struct type %s", l.target, l.typ)
		}
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() && !words[n.Name] {
					t.Errorf("%s.%s: the doc does not name the field %s", l.dir, l.alias, n.Name)
				}
			}
		}
	}
}

// typeDoc returns the doc comment of type name declared in the package in
// dir (relative to the module root), nil when there is none.
func typeDoc(t *testing.T, dir, name string) *ast.CommentGroup {
	var doc *ast.CommentGroup
	eachType(t, dir, func(d *ast.GenDecl, s *ast.TypeSpec) {
		if s.Name.Name != name {
			return
		}
		doc = s.Doc
		if doc == nil {
			doc = d.Doc
		}
	})
	return doc
}

// structType returns the struct type name declared in the package in dir,
// nil when there is none.
func structType(t *testing.T, dir, name string) *ast.StructType {
	var st *ast.StructType
	eachType(t, dir, func(_ *ast.GenDecl, s *ast.TypeSpec) {
		if x, ok := s.Type.(*ast.StructType); ok && s.Name.Name == name {
			st = x
		}
	})
	return st
}

// eachType calls f with every type declared in the non-test files of the
// package in dir.
func eachType(t *testing.T, dir string, f func(*ast.GenDecl, *ast.TypeSpec)) {
	t.Helper()
	path := filepath.Join("..", "..", dir)
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(path, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if g, ok := d.(*ast.GenDecl); ok {
				for _, s := range g.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						f(g, ts)
					}
				}
			}
		}
	}
}
