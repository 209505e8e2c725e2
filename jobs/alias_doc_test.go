package jobs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAliasesNameTheirDefinition checks that every exported type alias of a
// public package that stands for a type of an internal package says where
// that type is documented: go doc shows an alias without its fields or
// signature, so its comment must give the path that lists them, or name
// every exported field itself (jobs.Record's does).
func TestAliasesNameTheirDefinition(t *testing.T) {
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "cmd", "examples", "testdata", "otelfencedq":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		imports := map[string]string{}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = p
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				sel, ok := ts.Type.(*ast.SelectorExpr)
				if !ts.Assign.IsValid() || !ok || !ts.Name.IsExported() {
					continue
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !strings.Contains(imports[pkg.Name], "/internal/") {
					continue
				}
				target := strings.TrimPrefix(imports[pkg.Name], "github.com/fencedq/fencedq/")
				ok, fields := hasFields(t, filepath.Join(root, target), sel.Sel.Name)
				if !ok {
					continue // a named string or map: its values are documented where it is used
				}
				checked++
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				want := imports[pkg.Name] + "." + sel.Sel.Name
				text := strings.Join(strings.Fields(doc.Text()), " ")
				if !strings.Contains(text, want) && !namesAll(text, fields) {
					t.Errorf("%s: alias %s's comment does not name %s, where its fields or signature are documented", path, ts.Name.Name, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no alias of an internal type found: the walk is broken")
	}
}

// namesAll reports whether text names every one of fields (none: false).
func namesAll(text string, fields []string) bool {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return r != '_' && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) {
		words[w] = true
	}
	for _, f := range fields {
		if !words[f] {
			return false
		}
	}
	return len(fields) > 0
}

// hasFields reports whether the type name declared in the package in dir is
// a struct or a func type, whose fields or parameters an alias hides, and
// the struct's exported field names.
func hasFields(t *testing.T, dir, name string) (bool, []string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				if ts := spec.(*ast.TypeSpec); ts.Name.Name == name {
					switch typ := ts.Type.(type) {
					case *ast.StructType:
						var fields []string
						for _, f := range typ.Fields.List {
							for _, n := range f.Names {
								if n.IsExported() {
									fields = append(fields, n.Name)
								}
							}
						}
						return true, fields
					case *ast.FuncType:
						return true, nil
					}
					return false, nil
				}
			}
		}
	}
	t.Fatalf("%s declares no type %s", dir, name)
	return false, nil
}
