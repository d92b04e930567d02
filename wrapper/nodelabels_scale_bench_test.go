package wrapper_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/controller"
	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

func nodeLabelsNode(i int) string { return fmt.Sprintf("edge-%05d", i) }

// summaryWrites is how many writes of NodeLabelSummaries the apiserver has
// answered (created, updated, patched, applied; any code).
func summaryWrites(tb testing.TB, cp *controlplane.ControlPlane) float64 {
	tb.Helper()
	byVerb := apiserverMetrics(tb, adminClient(cp), "apiserver_request_total", "verb", func(labels string) bool {
		return strings.Contains(labels, `resource="nodelabelsummaries"`)
	})
	return byVerb["POST"] + byVerb["CREATE"] + byVerb["PUT"] + byVerb["UPDATE"] + byVerb["PATCH"] + byVerb["APPLY"]
}

// BenchmarkNodeLabelsAtScale: NodeLabelSummaries at fleet size (issue 46,
// item 2). SG_NL_NODES (10,000) Nodes with kubelet-sized status in
// SG_NL_UNITS (1,000) nodeunits on a real kube-apiserver and etcd, the
// application-grid-controller's summary writer, SG_NL_WRAPPERS (3) real
// wrappers, and beside them as many metadata informers of every Node (what
// a wrapper watches when there are no summaries: the baseline the
// summaries replace), each client on a connection of its own. Per client:
// the bytes from the apiserver (decoded bodies by kind, and on the wire
// below TLS) at start and for each change; per change, the summary writes
// the apiserver answered. Changes: SG_NL_REPORTS (1,000) nodes report
// their status (a heartbeat), one node moves to another existing
// nodeunit, 100 nodes (one from each of 100 nodeunits) move into 10 new
// nodeunits (the fleet benchmark's relabel), a node joins.
func BenchmarkNodeLabelsAtScale(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/fleet-scale.md")
	nodesN, unitsN := envInt("SG_NL_NODES", 10000), envInt("SG_NL_UNITS", 1000)
	clientsN, reports := envInt("SG_NL_WRAPPERS", 3), envInt("SG_NL_REPORTS", 1000)
	cp := controlplane.StartForTest(b, controlplane.Options{})
	admin := adminClient(cp)
	ctx := b.Context()
	if err := controller.EnsureCRDs(ctx, apiextensionsclient.NewForConfigOrDie(cp.Config)); err != nil {
		b.Fatal(err)
	}
	const ns = "nodelabels"
	createNamespace(b, admin, ns)
	// A topologyKeys Service makes the grid key a summarised key.
	createService(b, admin, ns, "topology", fmt.Sprintf(`[%q]`, gridKey))
	beat := time.Now()
	built := time.Now()
	fleetParallel(nodesN, func(i int) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeLabelsNode(i), Labels: map[string]string{
			gridKey: fmt.Sprintf("unit-%04d", i%unitsN), "kubernetes.io/hostname": nodeLabelsNode(i), "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "edge-small",
		}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Error(err)
			return
		}
		if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, n.Name, fleetNodeStatus(i, beat)); err != nil {
			b.Error(err)
		}
	})
	if b.Failed() {
		b.FailNow()
	}
	b.Logf("%d Nodes in %d nodeunits made in %s", nodesN, unitsN, time.Since(built).Round(time.Second))
	grids := versioned.NewForConfigOrDie(cp.Config)
	// Names and labels only: the Nodes' metadata, not 10,000 kubelet statuses a poll.
	meta := metadata.NewForConfigOrDie(cp.Config)
	listNodes := nodesFunc(func() ([]corev1.Node, error) {
		l, err := meta.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		nodes := make([]corev1.Node, len(l.Items))
		for i, m := range l.Items {
			nodes[i].ObjectMeta = m.ObjectMeta
		}
		return nodes, nil
	})
	w0 := summaryWrites(b, cp)
	converged := time.Now()
	runController(b, cp.Config)
	eventually(b, "node label summaries of every node", 10*time.Minute, func(ctx context.Context) (bool, error) {
		time.Sleep(200 * time.Millisecond) // each poll lists every Node
		return summarised(ctx, listNodes, grids, gridKey)
	})
	sums, err := grids.SuperedgeV1().NodeLabelSummaries().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var summaryJSON int
	for _, s := range sums.Items {
		raw, _ := json.Marshal(s)
		summaryJSON += len(raw)
	}
	b.Logf("summaries: %d buckets, %d bytes of JSON (%.1f a node), %v writes to converge in %s",
		len(sums.Items), summaryJSON, float64(summaryJSON)/float64(nodesN), summaryWrites(b, cp)-w0, time.Since(converged).Round(time.Millisecond))
	benchRec.Report(float64(len(sums.Items)), "buckets")
	benchRec.Report(summaryWrites(b, cp)-w0, "converge-summary-writes")

	type client struct {
		bytes *byteCounter
		wire  *wireCounter
	}
	var wrappers, watchers []client
	for i := range clientsN {
		c := client{&byteCounter{bytes: map[string]int64{}}, newWireCounter()}
		startWrapper(b, cp, nodeLabelsNode(i*unitsN/clientsN), "", wrapper.Options{Upstream: c.bytes.wrap(c.wire.wrap(b, cp.Config))})
		wrappers = append(wrappers, c)
	}
	for range clientsN {
		c := client{&byteCounter{bytes: map[string]int64{}}, newWireCounter()}
		inf := metadatainformer.NewFilteredMetadataInformer(metadata.NewForConfigOrDie(c.bytes.wrap(c.wire.wrap(b, cp.Config))),
			corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
		stop := make(chan struct{})
		b.Cleanup(func() { close(stop) })
		go inf.Run(stop)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			b.Fatal("metadata informer of Nodes did not sync")
		}
		watchers = append(watchers, c)
	}
	type reading struct{ summaries, wrapperAll, wrapperWire, nodes, nodesWire float64 }
	read := func() reading {
		var r reading
		for _, c := range wrappers {
			r.summaries += float64(c.bytes.get("summaries"))
			r.wrapperAll += float64(bytesOf(c.bytes))
			r.wrapperWire += float64(c.wire.total())
		}
		for _, c := range watchers {
			r.nodes += float64(bytesOf(c.bytes))
			r.nodesWire += float64(c.wire.total())
		}
		k := float64(clientsN)
		return reading{r.summaries / k, r.wrapperAll / k, r.wrapperWire / k, r.nodes / k, r.nodesWire / k}
	}
	// settle: no summary write and no client byte beyond bookmarks (a few
	// a second) for 5 s.
	settle := func() {
		lastW, last, still := -1.0, reading{}, 0
		eventually(b, "summary writes and client bytes still for 5 s", 10*time.Minute, func(context.Context) (bool, error) {
			time.Sleep(time.Second)
			w, cur := summaryWrites(b, cp), read()
			if w == lastW && cur.wrapperWire-last.wrapperWire < 200 && cur.nodesWire-last.nodesWire < 200 {
				still++
			} else {
				still = 0
			}
			lastW, last = w, cur
			return still >= 5, nil
		})
	}
	settle()
	start := read()
	b.Logf("at start, per client: wrapper %.0f bytes from the apiserver (%.0f of them summaries), %.0f on the wire; metadata watch of Nodes %.0f bytes, %.0f on the wire",
		start.wrapperAll, start.summaries, start.wrapperWire, start.nodes, start.nodesWire)
	benchRec.Report(start.summaries, "start-wrapper-summaries-B/client")
	benchRec.Report(start.wrapperAll, "start-wrapper-B/client")
	benchRec.Report(start.wrapperWire, "start-wrapper-wire-B/client")
	benchRec.Report(start.nodes, "start-nodes-watch-B/client")
	benchRec.Report(start.nodesWire, "start-nodes-watch-wire-B/client")

	relabel := func(i int, unit string) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, gridKey, unit)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, nodeLabelsNode(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	change := func(name string, do func()) {
		w, r0, at := summaryWrites(b, cp), read(), time.Now()
		do()
		eventually(b, name+": summaries match the Nodes", 5*time.Minute, func(ctx context.Context) (bool, error) {
			return summarised(ctx, listNodes, grids, gridKey)
		})
		summarisedIn := time.Since(at)
		settle()
		r := read()
		writes := summaryWrites(b, cp) - w
		b.Logf("%s: %v summary writes (summaries matched after %s); per client: wrapper %.0f bytes (%.0f summaries), %.0f on the wire; metadata watch of Nodes %.0f bytes, %.0f on the wire",
			name, writes, summarisedIn.Round(time.Millisecond), r.wrapperAll-r0.wrapperAll, r.summaries-r0.summaries, r.wrapperWire-r0.wrapperWire, r.nodes-r0.nodes, r.nodesWire-r0.nodesWire)
		benchRec.Report(writes, name+"-summary-writes")
		benchRec.Report(r.wrapperAll-r0.wrapperAll, name+"-wrapper-B/client")
		benchRec.Report(r.wrapperWire-r0.wrapperWire, name+"-wrapper-wire-B/client")
		benchRec.Report(r.nodes-r0.nodes, name+"-nodes-watch-B/client")
		benchRec.Report(r.nodesWire-r0.nodesWire, name+"-nodes-watch-wire-B/client")
	}
	change("status", func() {
		beat = beat.Add(10 * time.Second)
		fleetParallel(min(reports, nodesN), func(i int) {
			if _, err := admin.CoreV1().Nodes().PatchStatus(ctx, nodeLabelsNode(i), kubeletHeartbeat(beat)); err != nil {
				b.Error(err)
			}
		})
	})
	change("relabel1", func() { relabel(clientsN+1, fmt.Sprintf("unit-%04d", (clientsN+2)%unitsN)) })
	change("relabel100", func() {
		// One node from each of 100 nodeunits, none emptied, into 10 new ones.
		for k := range min(100, unitsN) {
			relabel(unitsN+k, fmt.Sprintf("unit-new-%d", k%10))
		}
	})
	change("join", func() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeLabelsNode(nodesN), Labels: map[string]string{gridKey: "unit-0000"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	})
}
