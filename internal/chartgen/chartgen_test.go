package chartgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// copyBuild copies build/VERSION, build/crds and build/manifests of the
// repository into a new root, where edit may change them.
func copyBuild(t *testing.T) string {
	t.Helper()
	repo, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, dir := range []string{"build/manifests", "build/crds"} {
		src := filepath.Join(repo, dir)
		err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(root, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(repo, "build/VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "build/VERSION"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateIsTheCommittedChart: the repository's chart is what the
// generator writes (make verify checks the same through the script).
func TestGenerateIsTheCommittedChart(t *testing.T) {
	repo, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := Generate(repo)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(repo, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s is not what the generator writes (err %v): run 'make generate'", name, err)
		}
	}
	for _, name := range []string{"build/chart/Chart.yaml", "build/chart/templates/wrapper.yaml", "build/chart/templates/monitoring.yaml", "build/chart/crds/superedge.io_deploymentgrids.yaml"} {
		if _, ok := files[name]; !ok {
			t.Errorf("%s not generated", name)
		}
	}
}

// TestGenerateRefusesMovedValues: a change to build/manifests that takes
// away what a value replaces fails the generator, naming the value and
// the object, instead of a chart that silently ignores the value.
func TestGenerateRefusesMovedValues(t *testing.T) {
	for _, c := range []struct{ file, old, new, want string }{
		{"upstream/upstream.env", "KUBERNETES_SERVICE_PORT=6443\n", "", `"upstream port"`},
		{"controller/deployment.yaml", "- --v=2", "- --v=3", `"controller args"`},
		{"coredns-node/daemonset.yaml", "--add-loopback-address=169.254.20.10/32", "--add-loopback-address=169.254.20.11/32", `"node-local address"`},
		{"controller/deployment.yaml", "  replicas: 2", "  replicas: 1", `"controller replicas"`},
	} {
		root := copyBuild(t)
		edit(t, filepath.Join(root, "build/manifests", c.file), c.old, c.new)
		_, err := Generate(root)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("editing %s: want an error naming %s, got %v", c.file, c.want, err)
		}
	}
}

// TestCondition: the expression that picks a render holds for exactly its
// combinations of the components.
func TestCondition(t *testing.T) {
	m, s := ".Values.monitoring.enabled", ".Values.siteStream.enabled"
	for _, c := range []struct {
		combos []int
		want   string
	}{
		{[]int{1, 3}, m},
		{[]int{0, 2}, "not " + m},
		{[]int{2, 3}, s},
		{[]int{0}, "and (not " + m + ") (not " + s + ")"},
		{[]int{3}, "and " + m + " " + s},
		{[]int{0, 3}, "or (and (not " + m + ") (not " + s + ")) (and " + m + " " + s + ")"},
	} {
		if got := condition(c.combos, 4); got != c.want {
			t.Errorf("condition(%v) = %q, want %q", c.combos, got, c.want)
		}
	}
}
