package wrapper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// byteCounter counts the bytes of upstream answers by what was asked.
type byteCounter struct {
	mu    sync.Mutex
	bytes map[string]int64
	uris  []string
}

// requestKind sorts a request: "nodes" (every Node), "node" (one, by field
// selector or name), "summaries", "endpoints" (v1 Endpoints) or "other".
func requestKind(r *http.Request) string {
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/nodelabelsummaries"):
		return "summaries"
	case p == "/api/v1/nodes" && r.URL.Query().Get("fieldSelector") == "":
		return "nodes"
	case strings.HasPrefix(p, "/api/v1/nodes"):
		return "node"
	case strings.HasPrefix(p, "/api/v1/") && strings.HasSuffix(p, "/endpoints"):
		return "endpoints"
	}
	return "other"
}

func (c *byteCounter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			kind := requestKind(r)
			c.mu.Lock()
			c.uris = append(c.uris, r.URL.RequestURI())
			c.mu.Unlock()
			resp, err := rt.RoundTrip(r)
			if err == nil {
				resp.Body = &countingBody{ReadCloser: resp.Body, add: func(n int) {
					c.mu.Lock()
					c.bytes[kind] += int64(n)
					c.mu.Unlock()
				}}
			}
			return resp, err
		})
	})
	return cfg
}

func (c *byteCounter) get(kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes[kind]
}

func (c *byteCounter) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.uris...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	add func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.add(n)
	return n, err
}

// runController runs the application-grid-controller's controllers (the
// summary writer among them) in process until the returned stop is called.
func runController(t testing.TB, cfg *rest.Config) (stop func()) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	kube := kubernetes.NewForConfigOrDie(cfg)
	grids := versioned.NewForConfigOrDie(cfg)
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(controller.Transform))
	gridInformers := gridinformers.NewSharedInformerFactoryWithOptions(grids, 0, gridinformers.WithTransform(controller.TransformGrids))
	ctrls, err := controller.NewControllers(controller.Deps{Kube: kube, Grids: grids,
		KubeInformers: kubeInformers, GridInformers: gridInformers, Recorder: &record.FakeRecorder{},
		LabelSummaryDelay: controller.DefaultLabelSummaryDelay}) // as the binary runs it
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kubeInformers.Start(ctx.Done())
	gridInformers.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrls.Run(ctx, 1)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			kubeInformers.Shutdown()
			gridInformers.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

// summarised reports whether the NodeLabelSummaries list every Node with
// exactly its values of keys.
func summarised(ctx context.Context, admin interface {
	Nodes() ([]corev1.Node, error)
}, grids versioned.Interface, keys ...string) (bool, error) {
	nodes, err := admin.Nodes()
	if err != nil {
		return false, err
	}
	sums, err := grids.SuperedgeV1().NodeLabelSummaries().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	got := map[string]map[string]string{}
	for _, s := range sums.Items {
		if len(s.Nodes) > superedgev1.MaxNodesPerLabelSummary {
			return false, fmt.Errorf("%s holds %d nodes", s.Name, len(s.Nodes))
		}
		for _, nl := range s.Nodes {
			if _, dup := got[nl.Name]; dup {
				return false, fmt.Errorf("node %s listed twice", nl.Name)
			}
			got[nl.Name] = nl.Labels
		}
	}
	if len(got) != len(nodes) {
		return false, fmt.Errorf("%d nodes summarised, %d exist", len(got), len(nodes))
	}
	for _, n := range nodes {
		l, ok := got[n.Name]
		if !ok {
			return false, fmt.Errorf("node %s not summarised", n.Name)
		}
		want := 0
		for _, k := range keys {
			if v, has := n.Labels[k]; has {
				want++
				if l[k] != v {
					return false, fmt.Errorf("node %s: %s=%q summarised as %q", n.Name, k, v, l[k])
				}
			}
		}
		if len(l) != want {
			return false, fmt.Errorf("node %s: summarised %v, only keys %v wanted", n.Name, l, keys)
		}
	}
	return true, nil
}

// TestNodeLabelsFromSummaries: with the controller writing
// NodeLabelSummaries, wrappers learn other nodes' labels from them, make no
// cluster-wide Node request, and other nodes' status reports reach them as
// (next to) nothing, where a metadata watch of Nodes receives each one; a
// relabel and a new topology key still reach every wrapper; without
// summaries they fall back to watching Nodes, and return to summaries when
// the controller writes them again.
func TestNodeLabelsFromSummaries(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	ctx := t.Context()
	admin := adminClient(cp)
	if err := controller.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		t.Fatal(err)
	}
	grids := versioned.NewForConfigOrDie(cp.Config)
	createNodes(t, admin)
	const others = 120 // two summaries' worth
	for i := range others {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other%03d", i),
			Labels: map[string]string{gridKey: "nodeunit3", "region": "r1", "kubernetes.io/os": "linux"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	listNodes := func() ([]corev1.Node, error) {
		l, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	ns := "summaries"
	createNamespace(t, admin, ns)
	createService(t, admin, ns, "grid", `["zone1"]`)
	createSlice(t, admin, ns, "grid", "grid-a", endpoint("10.1.0.1", "node0"), endpoint("10.1.0.2", "node1"),
		endpoint("10.1.0.3", "node2"), endpoint("10.1.0.4", "other007"), endpoint("10.1.0.5", "other110"))

	stopController := runController(t, cp.Config)
	eventually(t, "summaries of every node's zone1", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return summarised(ctx, nodesFunc(listNodes), grids, gridKey)
	})

	counters := map[string]*byteCounter{}
	infs := map[string]*proxyInformers{}
	wrappers := map[string]*runningWrapper{}
	for node := range nodeUnits {
		c := &byteCounter{bytes: map[string]int64{}}
		counters[node] = c
		w := startWrapper(t, cp, node, "", wrapper.Options{Upstream: c.wrap(cp.Config), NodeLabelRecheckInterval: time.Second})
		wrappers[node] = w
		infs[node] = startInformers(t, w.URL(), protobuf, node)
	}
	checkAll := func(what string) {
		t.Helper()
		for node, inf := range infs {
			eventually(t, what+" on "+node, 2*time.Minute, func(ctx context.Context) (bool, error) {
				return checkServed(ctx, admin, inf, ns, node)
			})
		}
	}
	waitSource := func(want string) {
		t.Helper()
		for node, w := range wrappers {
			eventually(t, node+"'s node labels from "+want, 2*time.Minute, func(context.Context) (bool, error) {
				return w.srv.NodeLabelSource() == want, nil
			})
		}
	}
	waitSource("summaries")
	checkAll("served from summaries")

	// Other nodes' status reports: a metadata watch of every Node (what the
	// wrapper did before) next to the wrappers.
	direct := &byteCounter{bytes: map[string]int64{}}
	metaInf := metadatainformer.NewFilteredMetadataInformer(metadata.NewForConfigOrDie(direct.wrap(cp.Config)),
		corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
	infCtx, stopInf := context.WithCancel(ctx)
	defer stopInf()
	go metaInf.Run(infCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), metaInf.HasSynced) {
		t.Fatal("metadata informer of Nodes did not sync")
	}
	before := map[string]int64{}
	for node, c := range counters {
		before[node] = c.get("summaries") + c.get("node") + c.get("nodes")
	}
	directBefore := direct.get("nodes")
	const reports = 100
	for i := range reports {
		name := fmt.Sprintf("other%03d", i%others)
		status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"2026-01-01T00:%02d:%02dZ","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, i/60, i%60)
		if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, name, []byte(status)); err != nil {
			t.Fatal(err)
		}
	}
	// The last report has reached the direct watch once its resourceVersion has.
	last, err := admin.CoreV1().Nodes().Get(ctx, fmt.Sprintf("other%03d", (reports-1)%others), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the direct watch sees the last status report", 2*time.Minute, func(context.Context) (bool, error) {
		o, ok, _ := metaInf.GetStore().GetByKey(last.Name)
		return ok && o.(*metav1.PartialObjectMetadata).ResourceVersion == last.ResourceVersion, nil
	})
	directBytes := direct.get("nodes") - directBefore
	for node, c := range counters {
		got := c.get("summaries") + c.get("node") + c.get("nodes") - before[node]
		t.Logf("%d status reports of other nodes: %s's wrapper received %d bytes of node labels, a metadata watch of Nodes %d", reports, node, got, directBytes)
		// Only BOOKMARKs may reach the wrapper meanwhile; each report is
		// hundreds of bytes at the direct watch.
		if got*10 > directBytes {
			t.Errorf("%s's wrapper received %d bytes for node labels during %d status reports of other nodes, more than a tenth of a metadata watch of Nodes (%d)", node, got, reports, directBytes)
		}
	}
	for node, c := range counters {
		for _, uri := range c.requests() {
			if strings.HasPrefix(uri, "/api/v1/nodes?") && !strings.Contains(uri, "fieldSelector=") {
				t.Errorf("%s's wrapper asked for every Node: %s", node, uri)
			}
		}
	}

	// A relabel reaches every wrapper.
	setNodeUnit(t, admin, "node2", "nodeunit1")
	setNodeUnit(t, admin, "other007", "nodeunit1")
	checkAll("after relabels")

	// A new topology key is summarised and used.
	createService(t, admin, ns, "regional", `["region","*"]`)
	createSlice(t, admin, ns, "regional", "regional-a", endpoint("10.2.0.1", "other001"), endpoint("10.2.0.2", "other002"), endpoint("10.2.0.3", "node1"))
	for _, n := range []string{"node0", "node1"} {
		if _, err := admin.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"labels":{"region":"r1"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "summaries of zone1 and region", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return summarised(ctx, nodesFunc(listNodes), grids, gridKey, "region")
	})
	checkAll("with a new topology key")

	// No controller, no summaries: every wrapper watches Nodes again and
	// still follows relabels.
	stopController()
	if err := grids.SuperedgeV1().NodeLabelSummaries().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSource("nodes")
	setNodeUnit(t, admin, "node0", "nodeunit2")
	checkAll("watching Nodes after the summaries were deleted")

	// The controller is back: summaries again.
	runController(t, cp.Config)
	eventually(t, "summaries rewritten", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return summarised(ctx, nodesFunc(listNodes), grids, gridKey, "region")
	})
	waitSource("summaries")
	setNodeUnit(t, admin, "node1", "nodeunit1")
	checkAll("from summaries again")
}

type nodesFunc func() ([]corev1.Node, error)

func (f nodesFunc) Nodes() ([]corev1.Node, error) { return f() }
