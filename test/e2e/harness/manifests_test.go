package harness

import (
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
	sc := &shippedContainer{HostPaths: map[string]string{"state": "/var/lib/w"}}
	dir := t.TempDir()
	got, err := sc.withHostPaths(dir, []string{"--state-dir=/var/lib/w", "--other=/var/lib/wx", "--f=/var/lib/w/s.json", "chown 1:1 /var/lib/w && chmod 0700 /var/lib/w"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--state-dir=" + dir + "/state", "--other=/var/lib/wx", "--f=" + dir + "/state/s.json", "chown 1:1 " + dir + "/state && chmod 0700 " + dir + "/state"}
	if !slices.Equal(got, want) {
		t.Errorf("withHostPaths: %v, want %v", got, want)
	}
}
