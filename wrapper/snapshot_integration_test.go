package wrapper_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/wrapper"
)

// eventRecorder records, once armed, what informers' handlers see of one
// namespace, and any DELETED of a Node (kube-proxy exits on its own).
type eventRecorder struct {
	ns     string
	mu     sync.Mutex
	armed  bool
	events []string
}

func (r *eventRecorder) record(kind, typ string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok || (o.GetNamespace() != r.ns && (kind != "node" || typ != "DELETED")) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.armed {
		r.events = append(r.events, fmt.Sprintf("%s %s %s/%s", typ, kind, o.GetNamespace(), o.GetName()))
	}
}

func (r *eventRecorder) arm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed, r.events = true, nil
}

func (r *eventRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.events)
	slices.Sort(out)
	return out
}

// watchInformers records every event of the informers' handlers.
func (r *eventRecorder) watchInformers(t *testing.T, inf *proxyInformers) {
	t.Helper()
	for kind, i := range map[string]cache.SharedIndexInformer{"slice": inf.slices, "service": inf.services, "endpoints": inf.endpoints, "node": inf.node} {
		reg, err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.record(kind, "ADDED", obj) },
			UpdateFunc: func(_, obj any) { r.record(kind, "MODIFIED", obj) },
			DeleteFunc: func(obj any) { r.record(kind, "DELETED", obj) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if !cache.WaitForCacheSync(t.Context().Done(), reg.HasSynced) {
			t.Fatal("handler did not sync")
		}
	}
}

// relists returns the requests that (re)load a whole state: lists and
// watch-list requests.
func relists(uris []string) []string {
	var out []string
	for _, u := range uris {
		if !strings.HasPrefix(u, "GET /api") {
			continue
		}
		if !strings.Contains(u, "watch=") || strings.Contains(u, "sendInitialEvents=true") {
			out = append(out, u)
		}
	}
	return out
}

func readyz(t *testing.T, w *runningWrapper) (int, string) {
	t.Helper()
	resp, err := http.Get(w.URL() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSnapshotOutage: a wrapper restarted while the apiserver is away serves
// its snapshot at once; the informers that watched across the restart resume
// without relisting, a fresh unmodified informer syncs the same objects, the
// staleness shows in the metric and /readyz; when the apiserver returns the
// informers see exactly the changes made meanwhile, and still relist nothing.
func TestSnapshotOutage(t *testing.T) {
	// Not parallel: it reads the process-wide wrapper metrics, which another
	// test's wrapper would change.
	ns := "outage"
	cp, admin := startTestCluster(t, ns)
	createService(t, admin, ns, "svc", `["zone1"]`)
	createService(t, admin, ns, "plain", "")
	createSlice(t, admin, ns, "svc", "svc-a", endpoint("10.4.0.1", "node0"), endpoint("10.4.0.2", "node1"))
	createSlice(t, admin, ns, "svc", "svc-b", endpoint("10.4.1.1", "node0"))
	createSlice(t, admin, ns, "svc", "svc-foreign", endpoint("10.4.2.1", "node1"))
	createSlice(t, admin, ns, "plain", "plain-a", endpoint("10.4.3.1", "node2"))

	stateDir := filepath.Join(t.TempDir(), "state")
	opts := wrapper.Options{StateDir: stateDir, SnapshotInterval: 100 * time.Millisecond}
	w := startWrapper(t, cp, "node0", "", opts)
	inf := startInformers(t, w.URL(), protobuf, "node0")
	eventually(t, "informers converge", 30*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	rec := eventRecorder{ns: ns}
	rec.watchInformers(t, inf)
	before := sliceState(inf.slices.GetStore().List(), ns)
	servicesBefore := len(inf.services.GetStore().List())

	// client-go relists after a watch that ended within a second of its
	// start with no event ("very short watch"); kube-proxy's watches are long
	// lived: let these be more than a second old.
	eventually(t, "informers watch", 30*time.Second, func(context.Context) (bool, error) {
		return w.openWatches("endpointslices") == 1 && w.openWatches("nodes") == 1, nil
	})
	time.Sleep(1500 * time.Millisecond)

	// A clean stop writes the final snapshot.
	addr := w.addr
	w.Stop()
	if st, err := os.Stat(filepath.Join(stateDir, "snapshot.pb")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot after a clean stop: %v %v", st, err)
	}
	// Changes the wrapper does not see before the outage: one slice
	// changed, one deleted, one added, and one foreign change that the
	// served form does not show.
	patch := func(name, body string) {
		if _, err := admin.DiscoveryV1().EndpointSlices(ns).Patch(t.Context(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("svc-a", `{"endpoints":[{"addresses":["10.4.0.1"],"nodeName":"node0"},{"addresses":["10.4.0.3"],"nodeName":"node0"},{"addresses":["10.4.0.2"],"nodeName":"node1"}]}`)
	patch("svc-foreign", `{"endpoints":[{"addresses":["10.4.2.2"],"nodeName":"node1"}]}`)
	if err := admin.DiscoveryV1().EndpointSlices(ns).Delete(t.Context(), "svc-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createSlice(t, admin, ns, "svc", "svc-c", endpoint("10.4.4.1", "node0"))

	cp.StopAPIServer()
	rec.arm()
	staleBefore := metricValue(t, "application_grid_wrapper_snapshot_age_seconds", nil)
	w = startWrapper(t, cp, "node0", addr, opts) // returns once ready: from the snapshot
	if code, body := readyz(t, w); code != http.StatusOK || !strings.Contains(body, "serving the snapshot written at") {
		t.Fatalf("/readyz while serving the snapshot: %d %q", code, body)
	}
	if s := metricValue(t, "application_grid_wrapper_snapshot_age_seconds", nil); s <= 0 || staleBefore != 0 {
		t.Fatalf("staleness %v while serving the snapshot (%v before)", s, staleBefore)
	}

	// The informers that watched across the restart resume from the
	// snapshot's versions: every one watches again, none relisted.
	eventually(t, "informers watch the restarted wrapper", 60*time.Second, func(context.Context) (bool, error) {
		for _, r := range []string{"services", "endpoints", "endpointslices", "nodes"} {
			if got := w.openWatches(r); got != 1 {
				return false, fmt.Errorf("%v watches of %s, want 1", got, r)
			}
		}
		return true, nil
	})
	if l := relists(w.requestsSince(0)); len(l) != 0 {
		t.Fatalf("informers relisted from the snapshot: %q", l)
	}
	if got := rec.seen(); len(got) != 0 {
		t.Fatalf("informers saw events from the snapshot: %q", got)
	}
	// A fresh, unmodified informer syncs the snapshot's objects.
	fresh := startInformers(t, w.URL(), "", "node0")
	if got := sliceState(fresh.slices.GetStore().List(), ns); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("fresh informer from the snapshot: %v, want %v", got, before)
	}
	if got := len(fresh.services.GetStore().List()); got != servicesBefore || len(fresh.node.GetStore().List()) != 1 {
		t.Fatalf("fresh informer: %d services (want %d), node %v", got, servicesBefore, fresh.node.GetStore().List())
	}
	eventually(t, "the fresh informer watches", 30*time.Second, func(context.Context) (bool, error) {
		return w.openWatches("endpointslices") == 2 && w.openWatches("nodes") == 2, nil
	})
	mark := w.started.Load()

	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "informers converge after the apiserver returns", 60*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	eventually(t, "the staleness clears", 30*time.Second, func(context.Context) (bool, error) {
		return metricValue(t, "application_grid_wrapper_snapshot_age_seconds", nil) == 0, nil
	})
	if code, body := readyz(t, w); code != http.StatusOK || body != "ok" {
		t.Fatalf("/readyz after upstream synced: %d %q", code, body)
	}
	want := []string{"ADDED slice outage/svc-c", "DELETED slice outage/svc-b", "MODIFIED slice outage/svc-a"}
	if got := rec.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("informers saw %q, want only the differences %q", got, want)
	}
	if l := relists(w.requestsSince(mark)); len(l) != 0 {
		t.Fatalf("relists after the apiserver returned: %q", l)
	}
	if got := sliceState(fresh.slices.GetStore().List(), ns); fmt.Sprint(got) != fmt.Sprint(sliceState(inf.slices.GetStore().List(), ns)) {
		t.Fatalf("fresh informer %v, resumed one %v", got, sliceState(inf.slices.GetStore().List(), ns))
	}
}

// TestSnapshotStateDirUnusable: a state directory that cannot be written
// (here a regular file in its place) leaves the wrapper serving from memory,
// with the failure counted and shown on /readyz.
func TestSnapshotStateDirUnusable(t *testing.T) {
	// Not parallel: it reads the process-wide wrapper metrics, which another
	// test's wrapper would change.
	ns := "unusable"
	cp, admin := startTestCluster(t, ns)
	createService(t, admin, ns, "svc", `["zone1"]`)
	createSlice(t, admin, ns, "svc", "svc-a", endpoint("10.5.0.1", "node0"), endpoint("10.5.0.2", "node1"))
	state := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(state, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	errorsBefore := metricValue(t, "application_grid_wrapper_snapshot_writes_total", map[string]string{"result": "failed"})
	w := startWrapper(t, cp, "node0", "", wrapper.Options{StateDir: state, SnapshotInterval: 100 * time.Millisecond})
	inf := startInformers(t, w.URL(), protobuf, "node0")
	eventually(t, "informers converge", 30*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	if n := metricValue(t, "application_grid_wrapper_snapshot_writes_total", map[string]string{"result": "failed"}); n <= errorsBefore {
		t.Fatalf("failed snapshot writes %v, want more than %v", n, errorsBefore)
	}
	if code, body := readyz(t, w); code != http.StatusOK || !strings.Contains(body, "snapshot not written (serving from memory only)") {
		t.Fatalf("/readyz with an unusable state dir: %d %q", code, body)
	}
	createSlice(t, admin, ns, "svc", "svc-b", endpoint("10.5.1.1", "node0"))
	eventually(t, "changes are still served", 30*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
}

// TestSnapshotTooOldRelistsOnce: after a crash, the snapshot can be older
// than what an informer last saw. That informer's resume gets 410 Expired and
// it relists exactly once (to the snapshot's state); the others resume.
func TestSnapshotTooOldRelistsOnce(t *testing.T) {
	t.Parallel() // its own control plane
	ns := "tooold"
	cp, admin := startTestCluster(t, ns)
	createService(t, admin, ns, "svc", `["zone1"]`)
	createSlice(t, admin, ns, "svc", "svc-a", endpoint("10.6.0.1", "node0"))

	stateDir := t.TempDir()
	snapshot := filepath.Join(stateDir, "snapshot.pb")
	// Only the first snapshot (written once synced) before the stop.
	opts := wrapper.Options{StateDir: stateDir, SnapshotInterval: time.Hour}
	w := startWrapper(t, cp, "node0", "", opts)
	inf := startInformers(t, w.URL(), protobuf, "node0")
	eventually(t, "informers converge", 30*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	early, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	snapState := sliceState(inf.slices.GetStore().List(), ns)
	createSlice(t, admin, ns, "svc", "svc-new", endpoint("10.6.1.1", "node0"))
	eventually(t, "informers see the new slice", 30*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	// Long-lived watches (see TestSnapshotOutage).
	time.Sleep(1500 * time.Millisecond)
	addr := w.addr
	w.Stop()
	// A crash: the change never reached the snapshot.
	if err := os.WriteFile(snapshot, early, 0o600); err != nil {
		t.Fatal(err)
	}
	cp.StopAPIServer()
	w = startWrapper(t, cp, "node0", addr, opts)
	eventually(t, "informers watch the restarted wrapper and show the snapshot", 60*time.Second, func(context.Context) (bool, error) {
		for _, r := range []string{"services", "endpoints", "endpointslices", "nodes"} {
			if got := w.openWatches(r); got != 1 {
				return false, fmt.Errorf("%v watches of %s, want 1", got, r)
			}
		}
		if got := sliceState(inf.slices.GetStore().List(), ns); fmt.Sprint(got) != fmt.Sprint(snapState) {
			return false, fmt.Errorf("slices %v, want the snapshot's %v", got, snapState)
		}
		return true, nil
	})
	l := relists(w.requestsSince(0))
	if len(l) != 1 || !strings.Contains(l[0], "/endpointslices?") {
		t.Fatalf("relists %q, want exactly one, of endpointslices", l)
	}
	mark := w.started.Load()
	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "informers converge after the apiserver returns", 60*time.Second, func(ctx context.Context) (bool, error) {
		return checkServed(ctx, admin, inf, ns, "node0")
	})
	if l := relists(w.requestsSince(mark)); len(l) != 0 {
		t.Fatalf("relists after the apiserver returned: %q", l)
	}
}
