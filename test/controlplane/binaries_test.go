package controlplane

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestBinDirIsTheScripts: BinDir without KUBE_BIN_DIR is the directory
// hack/k8s-bins.sh builds into, for the default cache root and another one:
// the pins and the cache root are stated once for both.
func TestBinDirIsTheScripts(t *testing.T) {
	t.Setenv("KUBE_BIN_DIR", "")
	for _, root := range []string{"", t.TempDir()} {
		t.Setenv("SERVICEGROUP_CACHE", root)
		cmd := exec.Command("../../hack/k8s-bins.sh", "--print-dir")
		cmd.Env = append(os.Environ(), "K8S_VERSION=", "ETCD_VERSION=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/k8s-bins.sh --print-dir: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != BinDir() {
			t.Errorf("SERVICEGROUP_CACHE=%q: the script builds into %s, BinDir is %s", root, got, BinDir())
		}
	}
}

// TestKubernetesPinMatchesClientGo: the control plane the tests run is the
// release of the client-go we build with (v1.X.Y <-> v0.X.Y).
func TestKubernetesPinMatchesClientGo(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "k8s.io/client-go" {
			if want := "v0." + strings.TrimPrefix(KubernetesVersion, "v1."); f[1] != want {
				t.Fatalf("client-go %s, but versions.env pins Kubernetes %s (client-go %s)", f[1], KubernetesVersion, want)
			}
			return
		}
	}
	t.Fatal("go.mod does not require k8s.io/client-go")
}

// TestShippedKubeProxyIsThePinnedRelease: the kube-proxy image the shipped
// manifests, their documentation and the test data name is the release
// versions.env pins, the one the tests run.
func TestShippedKubeProxyIsThePinnedRelease(t *testing.T) {
	const image = "registry.k8s.io/kube-proxy:"
	found := 0
	for _, dir := range []string{"../../build", "../../test"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".md"}, filepath.Ext(path)) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, l := range strings.Split(string(data), "\n") {
				_, ref, ok := strings.Cut(l, image)
				if !ok {
					continue
				}
				found++
				// The tag: v, digits and dots, less a full stop ending a sentence.
				tag := ref
				if end := strings.IndexFunc(ref, func(r rune) bool { return r != 'v' && r != '.' && !unicode.IsDigit(r) }); end >= 0 {
					tag = ref[:end]
				}
				tag = strings.TrimSuffix(tag, ".")
				if tag != KubernetesVersion {
					t.Errorf("%s: %s%s, but versions.env pins %s", path, image, tag, KubernetesVersion)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found == 0 {
		t.Fatalf("no %s image named under build/ or test/", image)
	}
}
