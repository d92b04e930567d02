package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// noraceTestsDefault is hack/test.sh's line that sets NORACE_TESTS' default.
var noraceTestsDefault = regexp.MustCompile(`(?m)^NORACE_TESTS=\$\{NORACE_TESTS-'([^']*)'\}$`)

// A test that skips under -race (WithoutRace) runs in make test only if
// hack/test.sh's NORACE_TESTS names it: every such test must match its
// package's entry there, and every entry must match such a test (an entry
// matching none would run nothing, and say so nowhere).
func TestWithoutRaceTestsRunInMakeTest(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack/test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := noraceTestsDefault.FindSubmatch(script)
	if m == nil {
		t.Fatalf("hack/test.sh sets no default for NORACE_TESTS matching %s", noraceTestsDefault)
	}
	entries := map[string]*regexp.Regexp{} // ./pkg/ -> the tests it runs
	for _, e := range strings.Fields(string(m[1])) {
		pkg, run, ok := strings.Cut(e, ":")
		if !ok {
			t.Fatalf("NORACE_TESTS entry %q is not PKG:REGEXP", e)
		}
		re, err := regexp.Compile(run)
		if err != nil {
			t.Fatalf("NORACE_TESTS entry %q: %v", e, err)
		}
		entries[pkg] = re
	}

	callers := withoutRaceCallers(t, root)
	if len(callers) == 0 {
		t.Fatal("found no test calling testenv.WithoutRace: the scan is broken")
	}
	matched := map[string]bool{}
	for _, c := range callers {
		re := entries[c[0]]
		if re == nil || !re.MatchString(c[1]) {
			t.Errorf("%s%s skips under -race, but hack/test.sh's NORACE_TESTS does not run it (%s: %v)", c[0], c[1], c[0], re)
			continue
		}
		matched[c[0]] = true
	}
	for pkg, re := range entries {
		if !matched[pkg] {
			t.Errorf("NORACE_TESTS' entry %s:%s names no test of that package that calls testenv.WithoutRace", pkg, re)
		}
	}
}

// withoutRaceCallers: each top-level test function of the module that calls
// testenv.WithoutRace, as its package's directory ("./wrapper/") and name.
func withoutRaceCallers(t *testing.T, root string) [][2]string {
	t.Helper()
	var out [][2]string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(rel) + "/"
		if rel == "." {
			pkg = "./"
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "WithoutRace" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testenv" && !slices.Contains(out, [2]string{pkg, fn.Name.Name}) {
					out = append(out, [2]string{pkg, fn.Name.Name})
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
