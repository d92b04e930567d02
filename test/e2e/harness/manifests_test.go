package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The shipped wrapper DaemonSet resolves as a kubelet would start it.
func TestContainerForShippedWrapper(t *testing.T) {
	ds, err := readShippedDaemonSet(WrapperDaemonSet)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := readUpstreamEnv()
	if err != nil {
		t.Fatal(err)
	}
	if upstream["KUBERNETES_SERVICE_HOST"] == "" || upstream["KUBERNETES_SERVICE_PORT"] == "" {
		t.Fatalf("%s: %v", UpstreamEnvFile, upstream)
	}
	upstream["KUBERNETES_SERVICE_HOST"] = "10.0.0.1"
	sc, err := containerFor(ds, "node7", upstream)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sc.Args, "--node-name=node7") || !slices.Contains(sc.Args, "--bind-address="+WrapperAddr) {
		t.Errorf("args %v: want $(NODE_NAME) expanded and the bind address kube-proxy uses", sc.Args)
	}
	if !slices.Contains(sc.Env, "KUBERNETES_SERVICE_HOST=10.0.0.1") || !slices.Contains(sc.Env, "NODE_NAME=node7") {
		t.Errorf("env %v: want the upstream ConfigMap and NODE_NAME", sc.Env)
	}
	if sc.ServiceAccount != "servicegroup-wrapper" || sc.Namespace != "edge-system" {
		t.Errorf("service account %s/%s", sc.Namespace, sc.ServiceAccount)
	}
}

func TestContainerForRejectsWhatTheHarnessCannotPlay(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Name = "x"
	ds.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:    "c",
		EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}},
	}}
	if _, err := containerFor(ds, "n", nil); err == nil || !strings.Contains(err.Error(), "envFrom") {
		t.Errorf("secret envFrom: got %v, want an error naming envFrom", err)
	}
	ds.Spec.Template.Spec.Containers[0].EnvFrom = nil
	ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	if _, err := containerFor(ds, "n", nil); err == nil || !strings.Contains(err.Error(), "IP") {
		t.Errorf("status.podIP: got %v, want an error naming the variable", err)
	}
}

func TestExpandVarsAndHostPaths(t *testing.T) {
	env := map[string]string{"A": "1"}
	if got := expandVars("x=$(A),y=$(B)", env); got != "x=1,y=$(B)" {
		t.Errorf("expandVars: %q", got)
	}
	sc := &shippedContainer{HostPaths: map[string]hostPathMount{"state": {Mount: "/var/lib/w", Path: "/srv/w"}}}
	dir := t.TempDir()
	got, err := sc.withHostPaths(dir, []string{"--state-dir=/var/lib/w", "--other=/var/lib/wx", "--f=/var/lib/w/s.json", "chown 1:1 /var/lib/w && chmod 0700 /var/lib/w", "x/var/lib/w"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--state-dir=" + dir + "/srv/w", "--other=/var/lib/wx", "--f=" + dir + "/srv/w/s.json", "chown 1:1 " + dir + "/srv/w && chmod 0700 " + dir + "/srv/w", "x/var/lib/w"}
	if !slices.Equal(got, want) {
		t.Errorf("withHostPaths: %v, want %v", got, want)
	}

	// Another component's file on the node (type File): mapped onto the
	// same node path, once it is there; a path already mapped is left alone
	// by a mount it contains.
	other := &shippedContainer{HostPaths: map[string]hostPathMount{
		"kc":   {Mount: "/etc/x/kc", Path: "/srv/w/kc", MustExist: true},
		"snap": {Mount: "/srv", Path: "/srv/snap"},
	}}
	if _, err := other.withHostPaths(dir, []string{"kubeconfig /etc/x/kc"}); err == nil || !strings.Contains(err.Error(), "/srv/w/kc") {
		t.Errorf("a File volume not yet on the node: got %v, want an error naming it", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "srv/w/kc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = other.withHostPaths(dir, []string{"kubeconfig /etc/x/kc\nsnapshot /srv/s"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "kubeconfig " + dir + "/srv/w/kc\nsnapshot " + dir + "/srv/snap/s"; got[0] != want {
		t.Errorf("withHostPaths: %q, want %q", got[0], want)
	}
}
