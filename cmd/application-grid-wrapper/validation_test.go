package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestBadFlagTouchesNothing: a flag Validate refuses stops the command
// before anything touches the disk: neither the state directory nor
// --cert-dir is created. The kubeconfig is a usable one (of an apiserver
// nobody runs), and with every flag good the same command line does create
// the state directory (the last case): so a check made only after start-up
// would show here.
func TestBadFlagTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	stateDir, certDir := filepath.Join(dir, "state"), filepath.Join(dir, "certs")
	base := []string{"application-grid-wrapper", "--kubeconfig", kubeconfig, "--node-name", "n", "--state-dir", stateDir, "--bind-address", "127.0.0.1:0"}
	plain := slices.Concat(base, []string{"--insecure-plain-http"})
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"max watches", "--max-watches", slices.Concat(plain, []string{"--max-watches", "0"})},
		{"max requests", "--max-requests-inflight", slices.Concat(plain, []string{"--max-requests-inflight", "0"})},
		{"watches per uid over half", "--max-watches-per-uid is 51: it must be at least 1 and at most half of --max-watches (100)", slices.Concat(plain, []string{"--max-watches-per-uid", "51"})},
		{"watches per uid negative", "--max-watches-per-uid is -1", slices.Concat(plain, []string{"--max-watches-per-uid", "-1"})},
		{"requests per uid past a lowered total", "--max-requests-inflight-per-uid is 5: it must be at least 1 and at most half of --max-requests-inflight (8)", slices.Concat(plain, []string{"--max-requests-inflight", "8", "--max-requests-inflight-per-uid", "5"})},
		{"connections per uid over half", "--max-connections-per-uid is 3: it must be at least 1 and at most half of --max-connections (4)", slices.Concat(plain, []string{"--max-connections", "4", "--max-connections-per-uid", "3"})},
		{"max connections", "--max-connections", slices.Concat(plain, []string{"--max-connections", "0"})},
		{"idle timeout", "--idle-connection-timeout", slices.Concat(plain, []string{"--idle-connection-timeout", "0s"})},
		{"kube-proxy metrics", "--kube-proxy-metrics-url", slices.Concat(plain, []string{"--kube-proxy-metrics-url", "http://192.0.2.1:10249/metrics"})},
		{"secure metrics pair", "--secure-metrics-tls-private-key-file", slices.Concat(plain, []string{"--secure-metrics-tls-cert-file", filepath.Join(dir, "m.crt")})},
		{"peer port", "--peer-max-connections", slices.Concat(plain, []string{"--site-label", "site", "--peer-bind-address", "127.0.0.1:51009",
			"--peer-token-file", filepath.Join(dir, "token"), "--peer-max-connections", "0"})},
		{"cert dir on a wildcard", "--cert-dir", []string{"application-grid-wrapper", "--kubeconfig", kubeconfig, "--node-name", "n", "--state-dir", stateDir,
			"--bind-address", "0.0.0.0:51006", "--client-ca-file", filepath.Join(dir, "ca.crt"), "--cert-dir", certDir}},
	} {
		err := run(t.Context(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
		for _, d := range []string{stateDir, certDir} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Fatalf("%s: %s exists after the command refused its flags (%v)", tc.name, d, err)
			}
		}
	}

	// Every flag good: started, the state directory is written, and the
	// command ends with its context.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = run(ctx, plain)
	if _, err := os.Stat(filepath.Join(stateDir, "resourceversion")); err != nil {
		t.Fatalf("with every flag good the state directory was not written: %v", err)
	}
}
