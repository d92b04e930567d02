package cpuacct

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecordsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.jsonl")
	if recs, err := ReadRecords(path); err != nil || recs != nil {
		t.Fatalf("missing file: %v, %v; want no records, no error", recs, err)
	}
	// go test runs packages at once: each append lands whole.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			u := Usage{User: time.Duration(i) * time.Second, System: 500 * time.Millisecond, Wall: time.Minute}
			if err := Append(path, NewRecord("example.com/p"+string(rune('a'+i)), u, i%2)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs, err := ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 20 {
		t.Fatalf("%d records, want 20", len(recs))
	}
	var pkgs []string
	for _, r := range recs {
		pkgs = append(pkgs, r.Package)
		i := int(r.Package[len(r.Package)-1] - 'a')
		if u := r.Usage(); u.User != time.Duration(i)*time.Second || u.System != 500*time.Millisecond || u.Wall != time.Minute || r.Exit != i%2 {
			t.Errorf("%s: %+v exit %d", r.Package, u, r.Exit)
		}
	}
	slices.Sort(pkgs)
	if pkgs = slices.Compact(pkgs); len(pkgs) != 20 {
		t.Errorf("packages %q, want 20 distinct", pkgs)
	}
}

func TestReadRecordsBadLine(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not json":   `{"package":"a","userSeconds":1}` + "\n{\n",
		"no package": `{"userSeconds":1}` + "\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadRecords(path); err == nil || !strings.Contains(err.Error(), path+":") {
			t.Errorf("%s: error %v, want one naming the file and line", name, err)
		}
	}
}

func TestPackageOf(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("// comment\nmodule example.com/m // trailing\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{root: "example.com/m", sub: "example.com/m/a/b"} {
		if got, err := PackageOf(dir); err != nil || got != want {
			t.Errorf("PackageOf(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
	// This package, from the repository's go.mod.
	if got, err := PackageOf("."); err != nil || got != "github.com/servicegroup/servicegroup/internal/cpuacct" {
		t.Errorf("PackageOf(.) = %q, %v", got, err)
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "go.mod"), []byte("go 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PackageOf(bad); err == nil {
		t.Error("go.mod without a module directive: no error")
	}
}
