package superedge

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// env is one test's control plane (with kube-controller-manager: the
// Deployments' ReplicaSets and pods, the StatefulSets' revisions and pods),
// three nodes in two nodeunits of zone1, and the binaries.
type env struct {
	ctx   context.Context
	build *Build
	ours  string
	cp    *controlplane.ControlPlane
	kube  kubernetes.Interface
	grids versioned.Interface
	ext   apiextensionsclient.Interface
	repo  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testenv.Root(t, "SuperEdge's controller runs in a root directory of its own (chroot)")
	e := &env{build: RequireBuild(t)}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	paths, err := testbin.Paths(ctx, "application-grid-controller")
	if err != nil {
		t.Fatal(err)
	}
	e.ours = paths["application-grid-controller"]
	if e.repo, err = testbin.RepoRoot(); err != nil {
		t.Fatal(err)
	}
	if e.cp, err = controlplane.Start(ctx, controlplane.Options{ControllerManager: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.cp.Stop)
	e.kube = kubernetes.NewForConfigOrDie(e.cp.Config)
	e.grids = versioned.NewForConfigOrDie(e.cp.Config)
	e.ext = apiextensionsclient.NewForConfigOrDie(e.cp.Config)
	for _, n := range []struct{ name, unit string }{{"node0", units[0]}, {"node1", units[1]}, {"node2", units[1]}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{gridKey: n.unit, "kubernetes.io/hostname": n.name}}}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("node %s: %v", n.name, err)
		}
	}
	return e
}

// kubectl runs the cached kubectl as cluster admin.
func (e *env) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := controlplane.Binary("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(e.ctx, bin, append([]string{"--kubeconfig", e.cp.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startSuperEdge runs SuperEdge's controller (StartController), stopped and
// its log shown on failure at the test's end.
func (e *env) startSuperEdge(t *testing.T, name string, args ...string) *Controller {
	t.Helper()
	c, err := StartController(e.build, e.cp, filepath.Join(e.cp.Dir, name), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("SuperEdge's controller (%s):\n%s", name, c.LogTail(40))
		}
		c.Stop(5 * time.Second)
	})
	return c
}

// startOurs runs this project's controller (no leader election of its own:
// one replica), stopped and its log shown on failure at the test's end.
func (e *env) startOurs(t *testing.T, name string, args ...string) *controlplane.Process {
	t.Helper()
	health, err := controlplane.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.cp.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--kubeconfig=" + e.cp.Kubeconfig, "--leader-elect=false", fmt.Sprintf("--health-bind-address=127.0.0.1:%d", health), "--metrics-bind-address=0", "--v=2"}, args...)
	p, err := controlplane.StartProcess("application-grid-controller", exec.Command(e.ours, args...), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("our controller (%s):\n%s", name, p.LogTail(40))
		}
		p.Stop(5 * time.Second)
	})
	return p
}
