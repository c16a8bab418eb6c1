package lethe

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestCodesExported checks that every code of package grains has an
// exported constant here, with a doc comment, and a row in docs/api.md's
// table of codes and HTTP statuses. (The command line exits 1 for every
// one of them: see report in cmd/lethe.)
func TestCodesExported(t *testing.T) {
	fset := token.NewFileSet()
	grainsFile, err := parser.ParseFile(fset, "internal/grains/errors.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{} // constant name -> code
	for _, spec := range constSpecs(grainsFile) {
		if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "Code" {
			continue
		}
		lit, ok := spec.Values[0].(*ast.BasicLit)
		if !ok {
			t.Fatalf("grains.%s is not a literal", spec.Names[0].Name)
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		codes[spec.Names[0].Name] = v
	}
	if len(codes) < 15 {
		t.Fatalf("found %d codes in internal/grains/errors.go; the parse is wrong", len(codes))
	}

	rootFile, err := parser.ParseFile(fset, "codes.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, spec := range constSpecs(rootFile) {
		name := spec.Names[0].Name
		sel, ok := spec.Values[0].(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != name {
			t.Errorf("lethe.%s is not grains.%s", name, name)
		}
		if spec.Doc == nil || !regexp.MustCompile(`^`+name+` is `).MatchString(spec.Doc.Text()) {
			t.Errorf("lethe.%s has no doc comment starting %q", name, name+" is")
		}
		exported[name] = true
	}

	api, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, code := range codes {
		if !exported[name] {
			t.Errorf("grains.%s (%q) has no exported constant lethe.%s", name, code, name)
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(code) + "` \\| [0-9]{3} \\|")
		if !row.Match(api) {
			t.Errorf("docs/api.md's table of codes has no row for %q with its HTTP status", code)
		}
	}
	for name := range exported {
		if _, ok := codes[name]; !ok {
			t.Errorf("lethe.%s is not a code of package grains", name)
		}
	}
}

// constSpecs returns the single-name, single-value constants of f.
func constSpecs(f *ast.File) []*ast.ValueSpec {
	var specs []*ast.ValueSpec
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) == 1 && len(vs.Values) == 1 {
				specs = append(specs, vs)
			}
		}
	}
	return specs
}
