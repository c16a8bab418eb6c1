package lethe_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFilesFormLayers checks that the root package's files form layers: no
// file uses a name (a package-level declaration, or a method of DB called
// on db) declared in a file that uses, directly or not, a name of its own.
// db.go is the floor, open.go (Open wires everything) the roof.
func TestFilesFormLayers(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]*ast.File{}
	decl := map[string]string{}    // package-level name -> file
	methods := map[string]string{} // method of DB -> file
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decl[d.Name.Name] = name
				} else if recvIsDB(d.Recv) {
					methods[d.Name.Name] = name
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decl[s.Name.Name] = name
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decl[n.Name] = name
						}
					}
				}
			}
		}
	}
	uses := map[string]map[string]bool{} // file -> files it uses
	for name, f := range parsed {
		u := map[string]bool{}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl: // its name declares, it does not use
				if n.Recv != nil {
					ast.Inspect(n.Recv, visit)
				}
				ast.Inspect(n.Type, visit)
				if n.Body != nil {
					ast.Inspect(n.Body, visit)
				}
				return false
			case *ast.SelectorExpr: // x.Sel: Sel is a method of DB or not ours
				if to, ok := methods[n.Sel.Name]; ok && isDB(n.X) {
					u[to] = true
				}
				ast.Inspect(n.X, visit)
				return false
			case *ast.Ident:
				if to, ok := decl[n.Name]; ok {
					u[to] = true
				}
			}
			return true
		}
		for _, d := range f.Decls {
			ast.Inspect(d, visit)
		}
		delete(u, name)
		uses[name] = u
	}
	// A cycle between files is a file that reaches itself.
	for start := range uses {
		seen := map[string]bool{}
		stack := []string{start}
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for next := range uses[cur] {
				if next == start {
					var direct []string
					for u := range uses[start] {
						direct = append(direct, u)
					}
					slices.Sort(direct)
					t.Errorf("%s uses a file that uses it back (through %s); it uses %v", start, cur, direct)
				}
				if !seen[next] {
					seen[next] = true
					stack = append(stack, next)
				}
			}
		}
	}
	if len(uses["db.go"]) != 0 {
		t.Errorf("db.go, the floor, uses %v", uses["db.go"])
	}
}

// maxFacadeLines bounds the root package's code: it is a facade of thin
// methods over the internal packages, which hold the logic.
const maxFacadeLines = 2000

// TestRootIsAFacade checks that the root package's non-test files stay
// within maxFacadeLines lines.
func TestRootIsAFacade(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		total += bytes.Count(b, []byte("\n"))
	}
	if total > maxFacadeLines {
		t.Errorf("the root package has %d lines of code, more than %d: move the logic into an internal package", total, maxFacadeLines)
	}
}

// isDB reports whether x is the receiver db or a field db of something.
func isDB(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "db"
	case *ast.SelectorExpr:
		return x.Sel.Name == "db"
	}
	return false
}

func recvIsDB(l *ast.FieldList) bool {
	t := l.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.Name == "DB"
}
