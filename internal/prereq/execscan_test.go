package prereq

// A scanner of Go sources for the programs they run, for TestProgramsListed: go/ast only (no
// type checking, so it reads the whole module in well under a second), hence heuristics, each
// covered by a case of TestScanExecs.
//
// A run site is a call that starts or looks up a program by name:
//   - os/exec's Command (name is argument 0), CommandContext (1) and LookPath (0);
//   - `ip netns exec NS NAME ...` in the arguments of such a call: NAME runs too;
//   - a wrapper: a function or method that passes one of its parameters on as the name of a
//     run site (netlab's Host.Exec, Host.Start, Host.Run, a test's own exec helper); found
//     to a fixed point, and matched at call sites by name and argument position.
//
// The name is resolved, within the enclosing function and the package's top-level constants,
// from string literals: a literal; a variable assigned literals; a range variable over lists
// of literals (and X[0] of one over lists of lists: the first element of each inner list);
// filepath.Join(..., "name") (the base name); m["name"] (binaries by name). A name computed any other way (a path built
// from a flag, a binary in a temporary directory held in a struct) is left unresolved.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
)

// runSite is one call that runs a program.
type runSite struct {
	Pos  string // file:line
	Name string // the program's name (its base name for a path), "" when unresolved
}

// execFuncs are os/exec's functions that take a program name: argument index by name.
var execFuncs = map[string]int{"Command": 0, "CommandContext": 1, "LookPath": 0}

// wrapperKey names a wrapper: a method (x.Name, any receiver: there are no types here; an
// unexported one only within its package pkg) or a plain function of the package in directory
// pkg (Name within it, pkg.Name elsewhere, matched by the import path's last element).
type wrapperKey struct {
	name   string
	method bool
	pkg    string
}

type scanFile struct {
	path     string
	pkgDir   string
	file     *ast.File
	execName string            // the local name of os/exec, "" when not imported
	imports  map[string]string // local name -> import path's last element
}

// scanner holds the parsed sources.
type scanner struct {
	fset     *token.FileSet
	files    []*scanFile
	consts   map[string]map[string][]ast.Expr // package dir -> top-level name -> values
	wrappers map[wrapperKey]map[int]bool      // argument positions that name a program
}

// scanSources parses sources (path -> Go source) and returns every run site, sorted.
func scanSources(sources map[string][]byte) ([]runSite, error) {
	s := &scanner{fset: token.NewFileSet(), consts: map[string]map[string][]ast.Expr{}, wrappers: map[wrapperKey]map[int]bool{}}
	paths := make([]string, 0, len(sources))
	for p := range sources {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f, err := parser.ParseFile(s.fset, p, sources[p], parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		sf := &scanFile{path: p, pkgDir: filepath.Dir(p), file: f, imports: map[string]string{}}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := filepath.Base(path)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			sf.imports[local] = filepath.Base(path)
			if path == "os/exec" {
				sf.execName = local
			}
		}
		s.files = append(s.files, sf)
		s.collectConsts(sf)
	}
	// Wrappers to a fixed point: a wrapper of a wrapper is one too.
	for changed := true; changed; {
		changed = false
		for _, f := range s.files {
			for _, d := range f.file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				params := paramIndexes(fd)
				key := wrapperKey{name: fd.Name.Name, method: fd.Recv != nil}
				if !key.method || !ast.IsExported(key.name) {
					key.pkg = filepath.Base(f.pkgDir)
				}
				s.eachSite(f, fd.Body, func(_ ast.Node, name ast.Expr) {
					id, ok := name.(*ast.Ident)
					if !ok {
						return
					}
					i, ok := params[id.Name]
					if !ok {
						return
					}
					if s.wrappers[key] == nil {
						s.wrappers[key] = map[int]bool{}
					}
					if !s.wrappers[key][i] {
						s.wrappers[key][i] = true
						changed = true
					}
				})
			}
		}
	}
	var sites []runSite
	for _, f := range s.files {
		for _, d := range f.file.Decls {
			var body ast.Node = d
			var params map[string]int
			if fd, ok := d.(*ast.FuncDecl); ok {
				if fd.Body == nil {
					continue
				}
				body, params = fd.Body, paramIndexes(fd)
			}
			s.eachSite(f, body, func(call ast.Node, name ast.Expr) {
				if id, ok := name.(*ast.Ident); ok {
					if _, isParam := params[id.Name]; isParam {
						return // a wrapper's own call: its callers are the sites
					}
				}
				pos := s.fset.Position(call.Pos())
				at := pos.Filename + ":" + strconv.Itoa(pos.Line)
				names := s.resolve(f, body, name, 0)
				if len(names) == 0 {
					sites = append(sites, runSite{Pos: at})
				}
				for _, n := range names {
					sites = append(sites, runSite{Pos: at, Name: filepath.Base(n)})
				}
			})
		}
	}
	return sites, nil
}

// paramIndexes returns the positions of fd's string parameters by name: only a string can
// name a program.
func paramIndexes(fd *ast.FuncDecl) map[string]int {
	params := map[string]int{}
	i := 0
	for _, field := range fd.Type.Params.List {
		typ, _ := field.Type.(*ast.Ident)
		for _, n := range field.Names {
			if typ != nil && typ.Name == "string" {
				params[n.Name] = i
			}
			i++
		}
		if len(field.Names) == 0 {
			i++
		}
	}
	return params
}

func (s *scanner) collectConsts(f *scanFile) {
	m := s.consts[f.pkgDir]
	if m == nil {
		m = map[string][]ast.Expr{}
		s.consts[f.pkgDir] = m
	}
	for _, d := range f.file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					m[n.Name] = append(m[n.Name], vs.Values[i])
				}
			}
		}
	}
}

// eachSite calls fn with every call in n that runs a program and the expression naming it.
func (s *scanner) eachSite(f *scanFile, n ast.Node, fn func(call ast.Node, name ast.Expr)) {
	ast.Inspect(n, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		var positions []int
		isExec := false
		switch fun := call.Fun.(type) {
		case *ast.SelectorExpr:
			if pkg, ok := fun.X.(*ast.Ident); ok && f.execName != "" && pkg.Name == f.execName {
				if i, ok := execFuncs[fun.Sel.Name]; ok {
					positions, isExec = []int{i}, true
				}
				break
			}
			key := wrapperKey{name: fun.Sel.Name, method: true}
			if !ast.IsExported(key.name) { // an unexported method of this package
				key.pkg = filepath.Base(f.pkgDir)
			}
			if id, ok := fun.X.(*ast.Ident); ok && f.imports[id.Name] != "" {
				key = wrapperKey{name: fun.Sel.Name, pkg: f.imports[id.Name]} // pkg.Func
			}
			for i := range s.wrappers[key] {
				positions = append(positions, i)
			}
		case *ast.Ident:
			for i := range s.wrappers[wrapperKey{name: fun.Name, pkg: filepath.Base(f.pkgDir)}] {
				positions = append(positions, i)
			}
		}
		for _, i := range positions {
			if i < len(call.Args) {
				fn(call, call.Args[i])
			}
		}
		if isExec {
			// `ip netns exec NS NAME ...`: NAME runs too.
			lits := flatten(call.Args)
			for i := 0; i+3 < len(lits); i++ {
				if stringLit(lits[i]) == "netns" && stringLit(lits[i+1]) == "exec" {
					fn(call, lits[i+3])
				}
			}
		}
		return true
	})
}

// flatten lists the arguments of a call with append(...) and composite literals opened.
func flatten(args []ast.Expr) []ast.Expr {
	var out []ast.Expr
	for _, a := range args {
		switch a := a.(type) {
		case *ast.CompositeLit:
			out = append(out, flatten(a.Elts)...)
		case *ast.CallExpr:
			if id, ok := a.Fun.(*ast.Ident); ok && id.Name == "append" {
				out = append(out, flatten(a.Args)...)
				continue
			}
			out = append(out, a)
		default:
			out = append(out, a)
		}
	}
	return out
}

func stringLit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		if v, err := strconv.Unquote(b.Value); err == nil {
			return v
		}
	}
	return ""
}

// resolve returns the string literals e may hold, looking in scope (a function body, or a
// top-level declaration) and the package's top-level constants.
func (s *scanner) resolve(f *scanFile, scope ast.Node, e ast.Expr, depth int) []string {
	if depth > 6 {
		return nil
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if v := stringLit(e); v != "" {
			return []string{v}
		}
	case *ast.ParenExpr:
		return s.resolve(f, scope, e.X, depth+1)
	case *ast.CallExpr:
		// filepath.Join(..., last): the base name is last's.
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Join" && len(e.Args) > 0 {
			return s.resolve(f, scope, e.Args[len(e.Args)-1], depth+1)
		}
	case *ast.Ident:
		var out []string
		for _, v := range s.definitions(f, scope, e.Name) {
			if v.rangeOver != nil {
				out = append(out, listElements(s.sources(f, scope, v.rangeOver, depth), false)...)
				continue
			}
			out = append(out, s.resolve(f, scope, v.expr, depth+1)...)
		}
		return out
	case *ast.IndexExpr:
		// bins["name"]: binaries by name.
		if v := stringLit(e.Index); v != "" {
			return []string{v}
		}
		// x[0] over a range variable x of lists: the first element of each list.
		if lit, ok := e.Index.(*ast.BasicLit); ok && lit.Value == "0" {
			root := e.X
			if sel, ok := root.(*ast.SelectorExpr); ok { // c.args[0]
				root = sel.X
			}
			if id, ok := root.(*ast.Ident); ok {
				var out []string
				for _, v := range s.definitions(f, scope, id.Name) {
					if v.rangeOver != nil {
						out = append(out, listElements(s.sources(f, scope, v.rangeOver, depth), true)...)
					}
				}
				return out
			}
		}
	}
	return nil
}

// definition is what a name is given: an expression, or each element of a ranged-over one.
type definition struct {
	expr      ast.Expr
	rangeOver ast.Expr
}

// definitions finds the assignments to name in scope, then the package's top-level ones.
func (s *scanner) definitions(f *scanFile, scope ast.Node, name string) []definition {
	var defs []definition
	ast.Inspect(scope, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name == name && len(n.Rhs) == len(n.Lhs) {
					defs = append(defs, definition{expr: n.Rhs[i]})
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if id.Name == name && i < len(n.Values) {
					defs = append(defs, definition{expr: n.Values[i]})
				}
			}
		case *ast.RangeStmt:
			if id, ok := n.Value.(*ast.Ident); ok && id.Name == name {
				defs = append(defs, definition{rangeOver: n.X})
			}
		}
		return true
	})
	if len(defs) == 0 {
		for _, v := range s.consts[f.pkgDir][name] {
			defs = append(defs, definition{expr: v})
		}
	}
	return defs
}

// sources returns the expressions a ranged-over expression is built from: itself, or what is
// assigned to the variable it names.
func (s *scanner) sources(f *scanFile, scope ast.Node, e ast.Expr, depth int) []ast.Expr {
	id, ok := e.(*ast.Ident)
	if !ok || depth > 6 {
		return []ast.Expr{e}
	}
	var out []ast.Expr
	for _, d := range s.definitions(f, scope, id.Name) {
		if d.expr != nil {
			out = append(out, d.expr)
		}
	}
	return out
}

// listElements returns, from the innermost composite literals within exprs that start with a
// string literal, every string element (or only the first, for first).
func listElements(exprs []ast.Expr, first bool) []string {
	var out []string
	for _, e := range exprs {
		ast.Inspect(e, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || len(cl.Elts) == 0 || stringLit(cl.Elts[0]) == "" {
				return true
			}
			for i, el := range cl.Elts {
				if v := stringLit(el); v != "" && (i == 0 || !first) {
					out = append(out, v)
				}
			}
			return false
		})
	}
	return out
}
