package gridhosts

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
)

// requestLog records the path and query of every request a client sends.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.paths = append(l.paths, req.URL.RequestURI())
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// since returns the requests (path and query) under prefix made after the
// first n.
func (l *requestLog) since(n int, prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.paths[min(n, len(l.paths)):] {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.paths)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNodeModeLabelsFromSummaries: in node mode, while NodeLabelSummaries
// exist, gridhosts learns nodes' labels from them and sends no request for
// Nodes at all, so other nodes' status reports cost the node nothing; a
// label change in a summary moves the answers; when the summaries go it
// watches Nodes (answers as before), and returns to summaries when they are
// back.
func TestNodeModeLabelsFromSummaries(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	summary := func(node1Unit string) *superedgev1.NodeLabelSummary {
		s := &superedgev1.NodeLabelSummary{ObjectMeta: metav1.ObjectMeta{Name: "nodes-0"}, Keys: []string{"zone1"}}
		for i := 1; i <= 3; i++ {
			unit := fmt.Sprintf("nodeunit%d", i)
			if i == 1 {
				unit = node1Unit
			}
			s.Nodes = append(s.Nodes, superedgev1.NodeLabels{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"zone1": unit}})
		}
		return s
	}
	must(c.grids.SuperedgeV1().NodeLabelSummaries().Create(ctx, summary("nodeunit1"), metav1.CreateOptions{}))(t)

	g := New([]string{"cluster.local."})
	g.Node = "node-1"
	g.ClientConfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.cp.Kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg := must(g.restConfig())(t)
	log := &requestLog{}
	cfg.Wrap(log.wrap)
	if err := g.watch(cfg, nil); err != nil {
		t.Fatal(err)
	}
	g.watcher.NodeLabels().Recheck = time.Second
	if err := g.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stop() })

	ask := func() []string { return aRecords(g, "", demoNames(0)) }
	answers := func(what string, want ...string) {
		t.Helper()
		poll(t, 30*time.Second, what, func() error {
			if got := ask(); !slices.Equal(got, want) {
				return fmt.Errorf("got %v, want %v", got, want)
			}
			return nil
		})
	}
	source := func(want string) {
		t.Helper()
		poll(t, 30*time.Second, "node label source "+want, func() error {
			if got := g.watcher.NodeLabels().From(); got != want || !g.watcher.NodeLabels().HasSynced() {
				return fmt.Errorf("source %q (synced %v)", got, g.watcher.NodeLabels().HasSynced())
			}
			return nil
		})
	}

	source(nodelabels.FromSummaries)
	answers("node-1's nodeunit from the summary", "10.0.1.1")
	if got := log.since(0, "/api/v1/nodes"); len(got) != 0 {
		t.Fatalf("requests for Nodes while summaries exist: %v", got)
	}

	// Other nodes' status reports: nothing reaches gridhosts.
	before := log.len()
	for i := range 5 {
		n := must(c.kube.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{}))(t)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))}}
		must(c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}))(t)
	}
	// The summary's relabel, written after the status reports, is seen;
	// so had anything else been requested, it would be logged by now.
	s := must(c.grids.SuperedgeV1().NodeLabelSummaries().Get(ctx, "nodes-0", metav1.GetOptions{}))(t)
	s.Nodes = summary("nodeunit2").Nodes
	must(c.grids.SuperedgeV1().NodeLabelSummaries().Update(ctx, s, metav1.UpdateOptions{}))(t)
	answers("node-1's new nodeunit from the summary", "10.0.2.1")
	if got := log.since(before, "/api/v1/nodes"); len(got) != 0 {
		t.Fatalf("requests for Nodes after status reports: %v", got)
	}

	// Summaries gone (a rollback to a controller that writes none): Nodes
	// decide, and node-1's own label says nodeunit1.
	if err := c.grids.SuperedgeV1().NodeLabelSummaries().Delete(ctx, "nodes-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	source(nodelabels.FromNodes)
	answers("node-1's nodeunit from its Node", "10.0.1.1")

	// Summaries back: followed again, within the recheck.
	must(c.grids.SuperedgeV1().NodeLabelSummaries().Create(ctx, summary("nodeunit3"), metav1.CreateOptions{}))(t)
	source(nodelabels.FromSummaries)
	answers("node-1's nodeunit from the new summary", "10.0.3.1")
}

// TestServicesSelected: gridhosts caches every headless Service (a grid one
// may name its keys in a topologyKeys annotation alone) and only the other
// Services that carry the grid key label, so an ordinary Service's changes
// never reach it; the headless closed loop by annotation still answers.
func TestServicesSelected(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	plain := newService("default", "plain", "", false)
	must(c.kube.CoreV1().Services("default").Create(ctx, plain, metav1.CreateOptions{}))(t)
	byAnnotation := newService("default", "hl-annotated", "", true)
	byAnnotation.Annotations = map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}
	must(c.kube.CoreV1().Services("default").Create(ctx, byAnnotation, metav1.CreateOptions{}))(t)
	must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, newSlice("default", "hl-annotated-1", "hl-annotated", 80,
		testEndpoint{IP: "10.9.1.1", Node: "node-1", Hostname: "a", Ready: true},
		testEndpoint{IP: "10.9.2.1", Node: "node-2", Hostname: "b", Ready: true}), metav1.CreateOptions{}))(t)

	g := c.startNodeMode(t, "node-2")
	poll(t, 30*time.Second, "closed loop by annotation", func() error {
		got := aRecords(g, "", "hl-annotated.default.svc.cluster.local.")
		if !slices.Equal(got, []string{"10.9.2.1"}) {
			return fmt.Errorf("got %v", got)
		}
		return nil
	})
	cached := g.watcher.CachedServices()
	want := []string{"default/" + demoSvc, "default/hl-annotated"}
	slices.Sort(want)
	if !slices.Equal(cached, want) {
		t.Fatalf("Services cached %v, want %v (the plain Service and default/kubernetes never)", cached, want)
	}
}
