package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestMain lets TestJSONLogs run this test binary as the command itself:
// klog's output settings are process-wide.
func TestMain(m *testing.M) {
	if os.Getenv("RUN_APPLICATION_GRID_WRAPPER") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestJSONLogs runs the command with --logging-format json against a real
// apiserver until it is ready and exits on SIGTERM: every line it wrote,
// client-go's included, is one JSON object, among them its "Serving" line.
func TestJSONLogs(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.Options{})
	if _, err := kubernetes.NewForConfigOrDie(cp.Config).CoreV1().Nodes().Create(t.Context(),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addr, metricsAddr := controlplane.FreeAddress(t), controlplane.FreeAddress(t)
	cmd := exec.Command(os.Args[0], "--kubeconfig", cp.Kubeconfig, "--node-name", "node0", "--bind-address", addr,
		"--insecure-plain-http", "--metrics-bind-address", metricsAddr, "--state-dir", t.TempDir(), "-v", "4", "--logging-format", "json")
	cmd.Env = append(os.Environ(), "RUN_APPLICATION_GRID_WRAPPER=1")
	out, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("wrapper log:\n%s", log)
		}
	})

	var last error
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		last = fmt.Errorf("/readyz: status %d", resp.StatusCode)
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("wrapper not ready: %v", last)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no exit within 2m of SIGTERM")
	}

	log, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(testbin.JSONLogMessages(t, string(log)), "Serving") {
		t.Errorf("no JSON line with msg \"Serving\" in:\n%s", log)
	}
}
