package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSplitFlags(t *testing.T) {
	build, test, err := splitFlags(strings.Fields("-race -trimpath -count=1 -timeout 60m -ldflags=-w -parallel 4 -v -run ^TestA$"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-race", "-trimpath", "-ldflags=-w"}; !slices.Equal(build, want) {
		t.Errorf("build flags %q, want %q", build, want)
	}
	if want := []string{"-test.count=1", "-test.timeout=60m", "-test.parallel=4", "-test.v", "-test.run=^TestA$"}; !slices.Equal(test, want) {
		t.Errorf("test flags %q, want %q", test, want)
	}
	if _, _, err := splitFlags([]string{"-timeout"}); err == nil {
		t.Error("-timeout without its value: no error")
	}
}

func TestSplitCommand(t *testing.T) {
	got, err := splitCommand(`'/tmp/a b/cpuacct' exec --records "/tmp/r s.jsonl"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/tmp/a b/cpuacct", "exec", "--records", "/tmp/r s.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	if _, err := splitCommand("'open"); err == nil {
		t.Error("unterminated quote: no error")
	}
}

// TestRunsAsGoTestAndLinksOnce runs a module's packages (passing, failing,
// without tests, not building, and two of one name) through testrun twice:
// each ends as go test would end it, and the second run links nothing.
func TestRunsAsGoTestAndLinksOnce(t *testing.T) {
	mod := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.26\n")
	write("a/a.go", "package a\n\nfunc One() int { return 1 }\n")
	write("a/a_test.go", "package a\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestOne(t *testing.T) {\n\tif _, err := os.Stat(\"testdata/here\"); err != nil || One() != 1 {\n\t\tt.Fatal(err)\n\t}\n}\n")
	write("a/testdata/here", "")
	write("x/a/a_test.go", "package a\n\nimport \"testing\"\n\nfunc TestSame(t *testing.T) {}\n")
	write("b/b_test.go", "package b\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"as meant\") }\n")
	write("c/c.go", "package c\n")
	write("d/d_test.go", "package d\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { undefined() }\n")
	t.Chdir(mod)
	cache := t.TempDir()
	pkgs := []string{"example.com/m/a", "example.com/m/x/a", "example.com/m/b", "example.com/m/c", "example.com/m/d"}
	// -x: go prints each command it runs, the linker's too.
	args := append([]string{"-cache", cache, "-name", "lane", "-p", "2", "--", "-x", "-count=1", "-timeout", "5m", "--"}, pkgs...)

	// runOnce runs testrun and returns how many test binaries it linked.
	runOnce := func() int {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code, err := run(args, &stdout, &stderr)
		if err != nil {
			t.Fatalf("testrun: %v\n%s", err, stderr.String())
		}
		if code != 1 {
			t.Errorf("exit %d, want 1 (b and d failed)\n%s", code, stderr.String())
		}
		ends := map[string]string{}
		sc := bufio.NewScanner(&stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct{ Action, Package, Test string }
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("not an event: %q", sc.Text())
			}
			if e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
				ends[e.Package] = e.Action
			}
		}
		want := map[string]string{"example.com/m/a": "pass", "example.com/m/x/a": "pass", "example.com/m/b": "fail", "example.com/m/c": "skip", "example.com/m/d": "fail"}
		for p, w := range want {
			if ends[p] != w {
				t.Errorf("%s ended %q, want %q (all: %v)", p, ends[p], w, ends)
			}
		}
		for _, bin := range []string{"round-0/a.test", "round-1/a.test", "round-0/b.test"} {
			if _, err := os.Stat(filepath.Join(cache, "lane", bin)); err != nil {
				t.Error(err)
			}
		}
		links := 0
		for l := range strings.Lines(stderr.String()) {
			if strings.Contains(l, "/link -o ") {
				links++
			}
		}
		return links
	}

	if n := runOnce(); n != 3 {
		t.Errorf("the first run linked %d test binaries, want 3 (a, x/a, b)", n)
	}
	if n := runOnce(); n != 0 {
		t.Errorf("the second run linked %d test binaries, want none", n)
	}
	// A change links its package again, and only it.
	write("a/a.go", "package a\n\nfunc One() int { return 2 - 1 }\n")
	if n := runOnce(); n != 1 {
		t.Errorf("after a.go changed, %d test binaries were linked, want 1 (a)", n)
	}
}
