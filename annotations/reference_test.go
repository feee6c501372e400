package annotations

import (
	"flag"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/annotations.md from Markdown()")

const referencePath = "../docs/annotations.md"

func TestReferenceUpToDate(t *testing.T) {
	want := Markdown()
	if *update {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v; generate it with: go test ./annotations -run TestReferenceUpToDate -update", err)
	}
	if string(got) != want {
		t.Errorf("docs/annotations.md differs from Markdown(); regenerate it with: go test ./annotations -run TestReferenceUpToDate -update")
	}
}

// TestKeysRegistry checks the registry itself: names unique, fields filled in, and every exported
// key constant in keys*.go (each with a doc comment) listed exactly once, and nothing else.
// Whether each key is read is checked where its rules live: TestCommonRulesCoverKeys here, each
// provider's TestOptionRulesCoverKeys in its package.
func TestKeysRegistry(t *testing.T) {
	seen := map[string]string{}
	for _, k := range Keys {
		if k.Values == "" || k.Default == "" || k.Doc == "" {
			t.Errorf("%s: Values, Default and Doc must all be set", k.Name)
		}
		switch k.Provider {
		case providerAny, providerAWS, providerBareMetal:
		default:
			t.Errorf("%s: provider %q", k.Name, k.Provider)
		}
		if !strings.HasPrefix(k.Name, porticoPrefix) && !strings.HasPrefix(k.Name, awsPrefix) {
			t.Errorf("%s: canonical keys are under %s or %s", k.Name, porticoPrefix, awsPrefix)
		}
		for i, n := range k.names() {
			if prev, dup := seen[n]; dup {
				t.Errorf("%s listed twice (%s and %s)", n, prev, k.Name)
			}
			seen[n] = k.Name
			if i > 0 && strings.HasPrefix(n, porticoPrefix) {
				t.Errorf("alias %s: Portico's own spelling must be the canonical key", n)
			}
		}
	}

	fset := token.NewFileSet()
	paths, err := filepath.Glob("keys*.go")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no keys*.go: %v", err)
	}
	var files []*ast.File
	for _, path := range paths {
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	// The key files type-check alone (imports aside), and so do their constants.
	conf := types.Config{Error: func(error) {}}
	pkg, _ := conf.Check("annotations", fset, files, nil)
	consts := map[string]bool{}
	var decls []ast.Decl
	for _, file := range files {
		decls = append(decls, file.Decls...)
	}
	for _, decl := range decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for _, id := range vs.Names {
				if !id.IsExported() {
					continue
				}
				if vs.Doc == nil {
					t.Errorf("constant %s has no doc comment", id.Name)
				}
				c, ok := pkg.Scope().Lookup(id.Name).(*types.Const)
				if !ok || c.Val().Kind() != constant.String {
					t.Errorf("constant %s: not a string constant", id.Name)
					continue
				}
				v := constant.StringVal(c.Val())
				consts[v] = true
				if _, ok := seen[v]; !ok {
					t.Errorf("constant %s = %q is not in Keys", id.Name, v)
				}
			}
		}
	}
	for n := range seen {
		if !consts[n] {
			t.Errorf("Keys lists %q, which is not declared as an exported constant in keys*.go", n)
		}
	}
}
