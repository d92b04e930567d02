package controlplane

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/servicegroup/servicegroup/internal/buildcache"
)

//go:embed versions.env
var versionsEnv string

// The pinned releases, from versions.env (which hack/k8s-bins.sh reads too).
var (
	KubernetesVersion = pin("KUBERNETES")
	EtcdVersion       = pin("ETCD")
)

// pin returns the value of key in versions.env; a missing key is a broken
// checkout, not a condition to handle.
func pin(key string) string {
	for _, l := range strings.Split(versionsEnv, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			return v
		}
	}
	panic("test/controlplane/versions.env has no " + key)
}

// Binaries the harness can run.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	KubeProxy             = "kube-proxy"
	Kubectl               = "kubectl"
)

// BinDir is where hack/k8s-bins.sh put the binaries: $KUBE_BIN_DIR when set,
// else the script's default cache directory for the pinned versions.
func BinDir() string {
	if d := os.Getenv("KUBE_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(CacheRoot(), fmt.Sprintf("k8s-%s-etcd-%s-%s", KubernetesVersion, EtcdVersion, runtime.Version()), "bin")
}

// CacheRoot is the hack/ scripts' cache root (cache_root in
// hack/lib/k8s-module.sh; TestBinDirIsTheScripts compares them):
// $SERVICEGROUP_CACHE, else $XDG_CACHE_HOME/servicegroup, else
// ~/.cache/servicegroup.
func CacheRoot() string { return buildcache.Root() }

// Binary returns the path of one control-plane binary, or an error that says
// how to build it.
func Binary(name string) (string, error) {
	path := filepath.Join(BinDir(), name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found in %s: run 'make k8s-bins' (or set KUBE_BIN_DIR)", name, BinDir())
	}
	return path, nil
}
