package gridhosts

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// wireLog records every request (requestLog) and the response bodies of the
// child StatefulSet lists and watches, as they cross the wire.
type wireLog struct {
	requestLog
	bodies bytes.Buffer // under requestLog.mu
	// holdLabelled, while set, delays what the labelled children's watches
	// receive by that long, so the unlabelled watch is surely first.
	holdLabelled atomic.Int64
}

const childrenPath = "/apis/apps/v1/statefulsets"

func (l *wireLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return l.requestLog.wrap(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && strings.HasPrefix(req.URL.Path, childrenPath) {
			q := req.URL.Query()
			labelled := q.Get("watch") == "true" && strings.Contains(q.Get("labelSelector"), superedgev1.LabelGridNodeUnit+" in (")
			resp.Body = &teeBody{ReadCloser: resp.Body, log: l, labelled: labelled}
		}
		return resp, err
	}))
}

type teeBody struct {
	io.ReadCloser
	log      *wireLog
	labelled bool
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if d := b.log.holdLabelled.Load(); b.labelled && n > 0 && d > 0 {
		time.Sleep(time.Duration(d))
	}
	b.log.mu.Lock()
	b.log.bodies.Write(p[:n])
	b.log.mu.Unlock()
	return n, err
}

// received reports whether s was in any child StatefulSet response.
func (l *wireLog) received(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.bodies.Bytes(), []byte(s))
}

// indexedSets is the child StatefulSets the index holds.
func indexedSets(x *index.Index) []string {
	var out []string
	for _, s := range x.Contents().StatefulSets {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	slices.Sort(out)
	return out
}

// indexedSet is the StatefulSet ns/name the index holds, nil for none.
func indexedSet(x *index.Index, ns, name string) *index.SetObj {
	for _, s := range x.Contents().StatefulSets {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

// TestNodeModeSelectsOwnNodeunitChildren: in node mode the child
// StatefulSets of another nodeunit never cross the wire to gridhosts, not
// even their status changes, and no StatefulSetGrid is requested at all
// (the controller rewrites a grid's status with every child's state);
// this node's nodeunit's children do, a SuperEdge-made child keeps its
// answer while the controller takes it over (it moves from the watch of
// unlabelled children to the labelled one), and a relabel of the node
// moves the children and the answers with every answer the old nodeunit's
// pod until it is the new one's.
func TestNodeModeSelectsOwnNodeunitChildren(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	child := func(unit string) string { return "statefulsetgrid-demo-" + unit }
	label := func(unit string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, superedgev1.LabelGridNodeUnit, unit)
		must(c.kube.AppsV1().StatefulSets("default").Patch(ctx, child(unit), types.MergePatchType, []byte(patch), metav1.PatchOptions{}))(t)
	}
	// The controller's children in nodeunit2 and nodeunit3; nodeunit1's is
	// still SuperEdge's (no nodeunit label).
	label("nodeunit2")
	label("nodeunit3")

	wire := &wireLog{}
	g := c.startNodeMode(t, "node-1", wire.wrap)

	sets := func(what string, want ...string) {
		t.Helper()
		for i := range want {
			want[i] = "default/" + child(want[i])
		}
		poll(t, 2*time.Minute, what, func() error {
			if got := indexedSets(g.index); !slices.Equal(got, want) {
				return fmt.Errorf("children indexed %v, want %v", got, want)
			}
			return nil
		})
	}
	answers := func(what, ip string) {
		t.Helper()
		poll(t, 2*time.Minute, what, func() error {
			if got := aRecords(g, "", demoNames(0)); !slices.Equal(got, []string{ip}) {
				return fmt.Errorf("%v, want %s", got, ip)
			}
			return nil
		})
	}
	sets("nodeunit1's child only", "nodeunit1")
	answers("nodeunit1's pod", "10.0.1.1")

	// Takeover: nodeunit1's child gets the label, leaving the unlabelled
	// watch for the labelled one; its name is answered throughout, also
	// when the labelled watch hears of it well after the unlabelled one
	// (held back half a second here).
	wire.holdLabelled.Store(int64(500 * time.Millisecond))
	askWhile(t, g, "10.0.1.1", "10.0.1.1", "the takeover seen", func() { label("nodeunit1") }, func() error {
		if !slices.Contains(g.watcher.LabelledChildren(), "default/"+child("nodeunit1")) {
			return fmt.Errorf("the labelled watch does not hold it yet")
		}
		if keys := g.watcher.UnlabelledChildren(); len(keys) != 0 {
			return fmt.Errorf("the unlabelled watch still holds %v", keys)
		}
		return nil
	})
	wire.holdLabelled.Store(0)
	sets("nodeunit1's child after the takeover", "nodeunit1")

	// Status writes elsewhere: nodeunit3's child and the grid. Then one of
	// nodeunit1's child, which must arrive: had the others been sent, they
	// would have been before it.
	for i := range 5 {
		s := must(c.kube.AppsV1().StatefulSets("default").Get(ctx, child("nodeunit3"), metav1.GetOptions{}))(t)
		s.Status.ReadyReplicas, s.Status.Replicas = int32(i%3), 3
		must(c.kube.AppsV1().StatefulSets("default").UpdateStatus(ctx, s, metav1.UpdateOptions{}))(t)
		grid := must(c.grids.SuperedgeV1().StatefulSetGrids("default").Get(ctx, "statefulsetgrid-demo", metav1.GetOptions{}))(t)
		grid.Status.States = map[string]superedgev1.StatefulSetState{"nodeunit3": {Replicas: 3, ReadyReplicas: int32(i % 3)}}
		must(c.grids.SuperedgeV1().StatefulSetGrids("default").UpdateStatus(ctx, grid, metav1.UpdateOptions{}))(t)
	}
	own := must(c.kube.AppsV1().StatefulSets("default").Get(ctx, child("nodeunit1"), metav1.GetOptions{}))(t)
	own.Status.Replicas = 4
	own = must(c.kube.AppsV1().StatefulSets("default").UpdateStatus(ctx, own, metav1.UpdateOptions{}))(t)
	poll(t, 2*time.Minute, "nodeunit1's child's status change", func() error {
		s := indexedSet(g.index, "default", child("nodeunit1"))
		if s == nil || s.ResourceVersion != own.ResourceVersion {
			return fmt.Errorf("indexed %+v, want resourceVersion %s", s, own.ResourceVersion)
		}
		return nil
	})

	// The relabel: nodeunit2's child comes, nodeunit1's goes, the answers
	// move only once nodeunit2's pods are there.
	askWhile(t, g, "10.0.1.1", "10.0.2.1", "the relabel seen", func() {
		patch := `{"metadata":{"labels":{"zone1":"nodeunit2"}}}`
		must(c.kube.CoreV1().Nodes().Patch(ctx, "node-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}))(t)
	}, func() error {
		if got := aRecords(g, "", demoNames(0)); !slices.Equal(got, []string{"10.0.2.1"}) {
			return fmt.Errorf("answer %v", got)
		}
		return nil
	})
	sets("nodeunit2's child only after the relabel", "nodeunit2")

	if wire.received(child("nodeunit3")) {
		t.Errorf("nodeunit3's child crossed the wire to node-1's gridhosts")
	}
	if !wire.received(child("nodeunit2")) || !wire.received(child("nodeunit1")) {
		t.Errorf("own nodeunits' children not seen on the wire: the check above cannot fail")
	}
	if got := wire.since(0, "/apis/superedge.io/v1/statefulsetgrids"); len(got) != 0 {
		t.Errorf("StatefulSetGrids requested in node mode: %v", got)
	}
	if got := wire.since(0, "/apis/superedge.io/v1/namespaces"); len(got) != 0 {
		t.Errorf("namespaced superedge.io resources requested in node mode: %v", got)
	}
	for _, r := range wire.since(0, childrenPath) {
		if !strings.Contains(r, "labelSelector=") {
			t.Errorf("child StatefulSets requested without a selector: %s", r)
		}
	}
}
