package gridcli

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestWrapperProbeStaticPod: the doctor finds the wrapper of the shipped
// static pod, where it is a sidecar (an init container), and its probe URL.
func TestWrapperProbeStaticPod(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "build", "static-pods", "servicegroup-edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		t.Fatal(err)
	}
	c, url, err := wrapperProbe(&pod)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != wrapperContainer || url != "http://127.0.0.1:51007/readyz" {
		t.Errorf("wrapperProbe: container %q, URL %q", c.Name, url)
	}
}
