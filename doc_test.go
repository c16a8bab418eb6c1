package lethe_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
)

// TestGrainDocNamesEveryField holds the doc comment of lethe.Grain (an
// alias, so go doc shows the comment, not the struct) to the struct: every
// field is named with its JSON name.
func TestGrainDocNamesEveryField(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var comment string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if s.(*ast.TypeSpec).Name.Name == "Grain" {
					comment = g.Doc.Text()
				}
			}
		}
	}
	if comment == "" {
		t.Fatal("lethe.Grain has no doc comment")
	}
	typ := reflect.TypeFor[lethe.Grain]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !strings.Contains(comment, f.Name) || !strings.Contains(comment, name) {
			t.Errorf("the doc comment of lethe.Grain does not name field %s (%s)", f.Name, name)
		}
	}
}
