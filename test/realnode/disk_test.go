package realnode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneToLogs keeps small text files whole, a large log's two ends, and
// nothing else.
func TestPruneToLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	small := write("node0/containerd.toml", []byte("version = 3\n"))
	// A log of numbered lines, three times what is kept.
	var big bytes.Buffer
	for i := 0; big.Len() < 3*keptTextSize; i++ {
		big.WriteString(strings.Repeat("x", 40) + " line\n")
	}
	whole := big.Bytes()
	large := write("node0/kubelet.log", whole)
	binary := write("node0/bin/kubelet", []byte("\x7fELF"))
	layer := write("registry/blobs/sha256/ab/data", []byte("layer"))

	if !pruneToLogs(dir) {
		t.Fatal("pruneToLogs left the directory whole: nothing is mounted under it")
	}
	if got, err := os.ReadFile(small); err != nil || string(got) != "version = 3\n" {
		t.Errorf("small text file: %q, %v; want it whole", got, err)
	}
	got, err := os.ReadFile(large)
	if err != nil {
		t.Fatalf("large log: %v; want its ends kept", err)
	}
	half := keptTextSize / 2
	if !bytes.HasPrefix(got, whole[:half]) || !bytes.HasSuffix(got, whole[len(whole)-half:]) {
		t.Errorf("large log: %d bytes, not the first and last %d of the %d written", len(got), half, len(whole))
	}
	if cut := got[half : len(got)-half]; !bytes.Contains(cut, []byte("bytes cut")) || len(cut) > 200 {
		t.Errorf("large log: between its ends %q, want one line saying what was cut", cut)
	}
	for _, gone := range []string{binary, layer, filepath.Join(dir, "registry"), filepath.Join(dir, "node0", "bin")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s: %v; want it removed", gone, err)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "node0", "*.ends")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}
