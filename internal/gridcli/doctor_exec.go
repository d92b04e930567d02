package gridcli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/servicegroup/servicegroup/internal/lockedbuffer"
)

// The wrapper image's entrypoint (internal/imagebuild) and its container's
// name in the DaemonSet and the static pod.
const (
	wrapperBinary    = "/application-grid-wrapper"
	wrapperContainer = "wrapper"
)

// podExecutor runs the wrapper binary inside its pod, as kubectl exec does
// (WebSocket, falling back to SPDY for older apiservers).
type podExecutor struct {
	cfg  *rest.Config
	kube kubernetes.Interface
}

// readyz returns the wrapper's /readyz answer, read on the probe address
// its readiness probe names.
func (e podExecutor) readyz(ctx context.Context, pod *corev1.Pod) (string, error) {
	container, url, err := wrapperProbe(pod)
	if err != nil {
		return "", err
	}
	binary := wrapperBinary
	if len(container.Command) > 0 {
		binary = container.Command[0]
	}
	req := e.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container.Name, Command: []string{binary, "--get-loopback=" + url}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Locked: after an error StreamWithContext may return while its copy
	// goroutines still write.
	var stdout, stderr lockedbuffer.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		// A not-ready answer is a non-zero exit with the reason on stdout.
		return stdout.String(), errors.New(strings.TrimSpace(stdout.String() + " " + stderr.String() + " " + err.Error()))
	}
	return stdout.String(), nil
}

// wrapperProbe finds the wrapper container (in the static pod a sidecar,
// among the init containers) and the URL of its readiness probe (loopback:
// the wrapper runs in the host network).
func wrapperProbe(pod *corev1.Pod) (*corev1.Container, string, error) {
	all := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for i := range all {
		c := &all[i]
		if c.Name != wrapperContainer || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			continue
		}
		g := c.ReadinessProbe.HTTPGet
		if g.Port.IntValue() == 0 {
			continue // a named port: not the shipped DaemonSet's
		}
		host := g.Host
		if host == "" {
			host = "127.0.0.1"
		}
		return c, fmt.Sprintf("http://%s%s", net.JoinHostPort(host, g.Port.String()), g.Path), nil
	}
	return nil, "", fmt.Errorf("pod %s has no container %q with an HTTP readiness probe on a port number", pod.Name, wrapperContainer)
}
