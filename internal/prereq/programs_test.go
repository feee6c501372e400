package prereq

import (
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// moduleSources reads every .go file of the module (tests and every build tag included), but
// not testdata, with paths relative to the module root.
func moduleSources(t *testing.T) map[string][]byte {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	sources := map[string][]byte{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		sources[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) < 50 {
		t.Fatalf("read only %d Go files under %s", len(sources), root)
	}
	return sources
}

// unlisted returns, for each program the sites run that programs does not hold, where.
func unlisted(sites []runSite, programs []Program) map[string][]string {
	out := map[string][]string{}
	for _, s := range sites {
		if s.Name == "" {
			continue
		}
		if !slices.ContainsFunc(programs, func(p Program) bool { return p.Name == s.Name }) {
			out[s.Name] = append(out[s.Name], s.Pos)
		}
	}
	return out
}

// TestProgramsListed: every program Go code in this module runs is in Programs, with the Debian
// package make prereqs installs for it (or as built by the project); and every entry of
// Programs is run somewhere (or says why the scan cannot see it), so the list stays true both
// ways. A new `exec.Command("foo", ...)` fails here until foo is listed.
func TestProgramsListed(t *testing.T) {
	sites, err := scanSources(moduleSources(t))
	if err != nil {
		t.Fatal(err)
	}
	missing := unlisted(sites, Programs)
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("the code runs %q, which prereq.Programs does not list (add it with its Debian package, or as Built): at %s",
			n, strings.Join(missing[n], ", "))
	}
	seen := map[string]int{}
	for _, s := range sites {
		seen[s.Name]++
	}
	for _, p := range Programs {
		switch {
		case p.NotScanned == "" && seen[p.Name] == 0:
			t.Errorf("prereq.Programs lists %q, but no Go code runs it by that name: remove it, or say in NotScanned why the scan cannot see it", p.Name)
		case p.NotScanned != "" && seen[p.Name] > 0:
			t.Errorf("prereq.Programs says %q is not seen by the scan (%s), but it is, %d times: clear NotScanned", p.Name, p.NotScanned, seen[p.Name])
		}
		if (p.Source == Debian) != (p.Package != "") || (p.Source != Debian && p.Base) || p.Found == "" || p.RunBy == "" {
			t.Errorf("prereq.Programs entry %+v: a Debian program names its package (others none), and every entry says how it is found and who runs it", p)
		}
	}
	t.Logf("%d run sites name %d programs", len(sites), len(seen)-1)
}

// TestPackagesFromPrograms: make prereqs installs the package of every Debian program that is
// not part of every Debian system, and finds it by that program.
func TestPackagesFromPrograms(t *testing.T) {
	for _, p := range Programs {
		if p.Source != Debian || p.Base {
			continue
		}
		i := slices.IndexFunc(Packages, func(pkg Package) bool { return pkg.Name == p.Package })
		if i < 0 {
			t.Errorf("%s's package %s is not in Packages: make prereqs would not install it", p.Name, p.Package)
			continue
		}
		if p.Name != "python3" && !slices.Contains(Packages[i].Commands, p.Name) && (p.Path == "" || !slices.Contains(Packages[i].Commands, p.Path)) {
			t.Errorf("package %s does not check for %s", p.Package, p.Name)
		}
		if p.Privileged != Packages[i].Privileged && p.Privileged {
			t.Errorf("package %s is not privileged though %s is", p.Package, p.Name)
		}
	}
	if !slices.Contains(IPUtilsArping.Commands, "arping") || IPUtilsArping.Name != "iputils-arping" {
		t.Errorf("IPUtilsArping = %+v", IPUtilsArping)
	}
}

// TestScanExecs runs the scanner on small sources, one per way code names a program; the last
// cases show that a program missing from the list fails TestProgramsListed.
func TestScanExecs(t *testing.T) {
	const header = "package p\n\nimport (\n\t\"context\"\n\t\"os/exec\"\n\t\"path/filepath\"\n)\n\nvar _ = context.Background\nvar _ = filepath.Join\n\n"
	for _, tc := range []struct {
		name string
		src  string
		want []string // names found, sorted, "" for an unresolved site
	}{
		{"literal", `func f() { exec.Command("arping", "-c", "1") }`, []string{"arping"}},
		{"CommandContext and LookPath", `func f(ctx context.Context) { exec.CommandContext(ctx, "birdc"); exec.LookPath("bird") }`,
			[]string{"bird", "birdc"}},
		{"renamed import", `func f() { osexec.Command("nft") }`, []string{"nft"}},
		{"ip netns exec runs the program after the namespace", `func f(ns string) { exec.Command("ip", "netns", "exec", ns, "arping", "-c", "1") }`,
			[]string{"arping", "ip"}},
		{"variable", `func f() { bin := "iptables"; if true { bin = "ip6tables" }; exec.Command(bin) }`, []string{"ip6tables", "iptables"}},
		{"range over a list", `func f() { for _, c := range []string{"bird", "birdc"} { exec.LookPath(c) } }`, []string{"bird", "birdc"}},
		{"first element of each list", `func f() { for _, c := range [][]string{{"ip", "link"}, {"sysctl", "-w"}} { exec.Command(c[0], c[1:]...) } }`,
			[]string{"ip", "sysctl"}},
		{"field of a struct list, appended to", `type cmd struct{ h int; args []string }
func f() { cmds := []cmd{{1, []string{"ip", "a"}}}; cmds = append(cmds, cmd{2, []string{"sysctl", "-w"}}); for _, c := range cmds { exec.Command(c.args[0], c.args[1:]...) } }`,
			[]string{"ip", "sysctl"}},
		{"top-level constant", `const tool = "conntrack"
func f() { exec.Command(tool) }`, []string{"conntrack"}},
		{"filepath.Join's base name", `func f(dir string) { exec.Command(filepath.Join(dir, "portico-agent")) }`, []string{"portico-agent"}},
		{"binaries by name", `func f(bins map[string]string) { exec.Command(bins["echoserver"]) }`, []string{"echoserver"}},
		{"a method wrapper and its wrapper", `type H struct{}
func (h *H) Exec(ctx context.Context, name string, args ...string) { nsCommand(ctx, "ns", name, args...) }
func nsCommand(ctx context.Context, ns, name string, args ...string) { exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...) }
func (l *L) run(h *H, name string) { h.Exec(context.Background(), name) }
type L struct{}
func f(h *H, l *L) { h.Exec(context.Background(), "arping", "-c", "1"); l.run(h, "ping") }`,
			[]string{"arping", "ip", "ping"}},
		{"a computed path is unresolved", `func f(p struct{ bin string }) { exec.Command(p.bin) }`, []string{""}},
		{"a non-string parameter is no wrapper", `func g(t int, s string) {}
func f() { g(1, "x"); exec.Command("ip") }`, []string{"ip"}},
		{"nothing run", `func f() { _ = "arping" }`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := header + tc.src
			if tc.name == "renamed import" {
				src = strings.Replace(src, "\t\"os/exec\"", "\tosexec \"os/exec\"", 1)
			}
			sites, err := scanSources(map[string][]byte{"p/p.go": []byte(src)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range sites {
				if !slices.Contains(got, s.Name) {
					got = append(got, s.Name)
				}
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("found %q, want %q (sites %+v)", got, tc.want, sites)
			}
		})
	}

	// An unlisted program is reported with where it runs; a listed one is not.
	sites, err := scanSources(map[string][]byte{"x/x.go": []byte(header +
		"func f() {\n\texec.Command(\"nmap\", \"-sn\")\n\texec.Command(\"arping\")\n}\n")})
	if err != nil {
		t.Fatal(err)
	}
	got := unlisted(sites, Programs)
	if want := map[string][]string{"nmap": {"x/x.go:13"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("unlisted = %v, want %v", got, want)
	}
	// Without arping in the list (as it was before arping joined the list), the L2 suites' arping is reported.
	var withoutArping []Program
	for _, p := range Programs {
		if p.Name != "arping" {
			withoutArping = append(withoutArping, p)
		}
	}
	if got := unlisted(sites, withoutArping); len(got["arping"]) != 1 {
		t.Errorf("with arping not listed, unlisted = %v, want arping reported", got)
	}
}

// e2ePackages are the harness packages a unit test must not import: they need root, a control
// plane or moto.
var e2ePackages = []string{"cluster", "netlab", "router", "k8sbin", "moto", "bmlab"}

// unitViolations returns, for test files outside e2e/ that build without tags (so `make
// test-unit` runs them), what makes them need the machine: an import of an e2e harness
// package, or a call of RequireRoot or RequireMoto.
func unitViolations(t *testing.T, sources map[string][]byte) []string {
	t.Helper()
	var out []string
	paths := make([]string, 0, len(sources))
	for p := range sources {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	fset := token.NewFileSet()
	for _, p := range paths {
		if !strings.HasSuffix(p, "_test.go") || strings.HasPrefix(filepath.ToSlash(p), "e2e/") {
			continue
		}
		f, err := parser.ParseFile(fset, p, sources[p], parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if needsTag(f) {
			continue
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, e := range e2ePackages {
				if path == "github.com/portico-lb/portico/e2e/"+e {
					out = append(out, fmt.Sprintf("%s imports %s", p, path))
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if (sel.Sel.Name == "RequireRoot" || sel.Sel.Name == "RequireMoto") && isIdent(sel.X, "prereq") {
					out = append(out, fmt.Sprintf("%s:%d calls prereq.%s", p, fset.Position(sel.Pos()).Line, sel.Sel.Name))
				}
			}
			return true
		})
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// needsTag reports whether f's //go:build line needs a tag besides the platform's: such a file
// is not built by a plain `go test`.
func needsTag(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if !constraint.IsGoBuild(c.Text) {
				continue
			}
			expr, err := constraint.Parse(c.Text)
			if err != nil {
				return false
			}
			return !expr.Eval(func(tag string) bool { return tag == "linux" || tag == "unix" || tag == "amd64" || tag == "arm64" })
		}
	}
	return false
}

// TestUnitTestsNeedNoMachine holds make test-unit's promise (no root, no control plane, no
// network lab, no bird, no moto): a test outside e2e/ that needs them carries the e2e (or moto)
// build tag, and make test-e2e runs it.
func TestUnitTestsNeedNoMachine(t *testing.T) {
	for _, v := range unitViolations(t, moduleSources(t)) {
		t.Errorf("%s: give the file `//go:build e2e` (make test-e2e runs it) or move it under e2e/", v)
	}
}

// TestUnitViolationsFound: the rule's check finds an untagged lab test and passes a tagged one.
func TestUnitViolationsFound(t *testing.T) {
	lab := "package x\n\nimport (\n\t\"testing\"\n\n\t\"github.com/portico-lb/portico/e2e/netlab\"\n\t\"github.com/portico-lb/portico/internal/prereq\"\n)\n\n" +
		"func TestLab(t *testing.T) {\n\tprereq.RequireRoot(t, prereq.IPRoute2)\n\t_ = netlab.New\n}\n"
	got := unitViolations(t, map[string][]byte{"x/lab_test.go": []byte(lab), "e2e/y/lab_test.go": []byte(lab)})
	want := []string{"x/lab_test.go imports github.com/portico-lb/portico/e2e/netlab", "x/lab_test.go:11 calls prereq.RequireRoot"}
	if !slices.Equal(got, want) {
		t.Errorf("untagged: %q, want %q", got, want)
	}
	if got := unitViolations(t, map[string][]byte{"x/lab_test.go": []byte("//go:build e2e\n\n" + lab)}); len(got) != 0 {
		t.Errorf("tagged e2e: %q, want none", got)
	}
}
