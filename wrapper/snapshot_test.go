package wrapper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/servicegroup/servicegroup/internal/statefile"
)

const (
	testNode     = "node0"
	testUpstream = "https://127.0.0.1:6443"
)

// lineLogger collects every log line (any verbosity) with its key/values.
type lineLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLogger) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 10})
}

func (l *lineLogger) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// newTestPersister builds stores for every served resource on one clock and
// a persister over them.
func newTestPersister(dir string, start uint64) *persister {
	clock := NewClock(start)
	p := &persister{dir: dir, node: testNode, upstream: testUpstream, codec: newSnapshotCodec(), clock: clock}
	for _, r := range servedResources {
		p.resources = append(p.resources, &servedResource{resource: r, store: NewStore(r.name, clock, r.newEmpty, r.fields, LogLimits{Bytes: DefaultEventLogBytes, MaxLagBytes: DefaultWatchMaxLagBytes})})
	}
	return p
}

func (p *persister) store(name string) *Store {
	for _, r := range p.resources {
		if r.name == name {
			return r.store
		}
	}
	panic("no store " + name)
}

func testService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": "b"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80}}}}
}

func testSlice(name string, ips ...string) *discoveryv1.EndpointSlice {
	node := testNode
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: &node})
	}
	return sl
}

// fill serves one object of each resource.
func fill(p *persister) {
	p.store(ResourceServices).Set("ns/svc", testService("svc"))
	p.store(ResourceEndpoints).Set("ns/svc", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}}}})
	p.store(ResourceEndpointSlices).Set("ns/svc-1", testSlice("svc-1", "10.1.0.1"))
	p.store(ResourceNodes).Set(testNode, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"zone1": "u1"}}})
}

// goodSnapshot writes a valid snapshot of fill's state and returns its bytes.
func goodSnapshot(t testing.TB, dir string) []byte {
	t.Helper()
	p := newTestPersister(dir, 1000)
	fill(p)
	p.write(logr.Discard(), time.Now())
	b, err := os.ReadFile(p.path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSnapshotRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := newTestPersister(dir, 1000)
	fill(p)
	p.store(ResourceServices).Set("ns/svc2", testService("svc2"))
	p.store(ResourceServices).Delete("ns/svc") // the last change of services is a deletion
	p.write(logr.Discard(), time.Now())

	st, err := os.Stat(p.path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot mode %v, want 0600", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}

	// A crash between create and rename leaves a temp file; load removes it.
	stale := filepath.Join(dir, "."+snapshotFile+".123.tmp")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs lineLogger
	sn := newTestPersister(dir, 5000).load(logs.logger())
	if sn == nil {
		t.Fatalf("snapshot not loaded: %v", logs.all())
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp file: %v", err)
	}
	for _, r := range p.resources {
		want, _, at := r.store.snapshotState()
		got := sn.objects[r.name]
		if len(got) != len(want) {
			t.Fatalf("%s: %d objects, want %d", r.name, len(got), len(want))
		}
		for _, o := range want {
			key := o.GetName()
			if r.namespaced {
				key = o.GetNamespace() + "/" + key
			}
			if !apiequality.Semantic.DeepEqual(got[key], o) {
				t.Fatalf("%s %s: got %#v, want %#v", r.name, key, got[key], o)
			}
		}
		sec := sn.section(r.name)
		if sec.At != at || sec.From != r.store.lastChange {
			t.Fatalf("%s: section %+v, want from %d at %d", r.name, sec, r.store.lastChange, at)
		}
	}
	// The services section starts at the deletion, not at its newest object (1005).
	if sec := sn.section(ResourceServices); sec.From != 1006 {
		t.Fatalf("services section from %d, want 1006 (the deletion)", sec.From)
	}
}

// TestSnapshotTimeIsLastReachable: a snapshot's writtenAt is when upstream
// last answered (gridhosts' rule). With upstream away, an unchanged state
// is not rewritten (not even at shutdown) and a changed one keeps that
// time; reachable again, the time moves on at shutdown; an unchanged state
// is not rewritten before the refresh interval otherwise, and upstream is
// not asked.
func TestSnapshotTimeIsLastReachable(t *testing.T) {
	dir := t.TempDir()
	p := newTestPersister(dir, 1000)
	fill(p)
	var away error
	probes := 0
	p.stamp.Probe = func(context.Context) error { probes++; return away }
	writtenAt := func() time.Time {
		t.Helper()
		sn := newTestPersister(dir, 5000).load(logr.Discard())
		if sn == nil {
			t.Fatal("no snapshot")
		}
		return sn.header.WrittenAt
	}
	p.maybeWrite(logr.Discard(), false)
	online := writtenAt()

	p.maybeWrite(logr.Discard(), false)
	if probes != 1 {
		t.Fatalf("unchanged, not due: %d probes, want 1 (the first write's)", probes)
	}
	away = errors.New("connection refused")
	p.maybeWrite(logr.Discard(), true)
	if got := writtenAt(); !got.Equal(online) {
		t.Fatalf("unchanged at shutdown during an outage: written %v, want %v", got, online)
	}
	p.store(ResourceServices).Set("ns/other", testService("other"))
	p.maybeWrite(logr.Discard(), false)
	if got := writtenAt(); !got.Equal(online) {
		t.Fatalf("changed during an outage: written %v, want the last reachable time %v", got, online)
	}
	if sn := newTestPersister(dir, 5000).load(logr.Discard()); len(sn.objects[ResourceServices]) != 2 {
		t.Fatalf("changed state not written: %d Services", len(sn.objects[ResourceServices]))
	}

	away = nil
	p.maybeWrite(logr.Discard(), true)
	if got := writtenAt(); !got.After(online) {
		t.Fatalf("reachable again: written %v, want after %v", got, online)
	}
}

// TestBadSnapshotsIgnored: every kind of bad snapshot is ignored with exactly
// one log line naming the reason, never a panic and never served.
func TestBadSnapshotsIgnored(t *testing.T) {
	good := goodSnapshot(t, t.TempDir())
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	reframe := func(format statefile.Format, mut func(h *snapshotHeader, lists []snapshotList) []snapshotList) []byte {
		dir := t.TempDir()
		p := newTestPersister(dir, 1000)
		fill(p)
		var lists []snapshotList
		for _, r := range p.resources {
			objs, from, at := r.store.snapshotState()
			lists = append(lists, snapshotList{res: r.resource, items: objs, section: snapshotSection{Resource: r.name, From: from, At: at, Objects: len(objs)}})
		}
		h := snapshotHeader{NodeName: testNode, Upstream: testUpstream, WrittenAt: time.Now()}
		lists = mut(&h, lists)
		if _, err := statefile.WriteFramed(dir, snapshotFile, format, func(w io.Writer) error { return p.codec.encode(w, h, lists) }); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p.path())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reencode := func(mut func(h *snapshotHeader, lists []snapshotList) []snapshotList) []byte {
		return reframe(snapshotFormat, mut)
	}
	newer := snapshotFormat
	newer.Version++
	// The layout before statefile's framing: a JSON header frame first,
	// the SHA-256 frame last.
	unframed := []byte(`{"kind":"ApplicationGridWrapperSnapshot","formatVersion":1,"nodeName":"node0"}`)
	unframed = append(binary.BigEndian.AppendUint32(nil, uint32(len(unframed))), unframed...)
	unframed = append(unframed, 0, 0, 0, 32)
	unframed = append(unframed, make([]byte, 32)...)
	secretList := &resource{name: ResourceServices, gv: corev1.SchemeGroupVersion, namespaced: true,
		objectTypes: objectTypes{newList: func(items []Object, rv string) runtime.Object {
			return &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}}}
		}}}
	cases := []struct {
		name, reason string
		data         []byte // nil: no file
		dir          bool   // a directory where the file should be
		fifo         bool   // a named pipe there (opening it would block)
		maxAge       time.Duration
	}{
		{name: "missing", reason: "No snapshot"},
		{name: "empty", data: []byte{}, reason: statefile.ReasonEmpty},
		{name: "truncated to 3 bytes", data: good[:3], reason: snapTruncated},
		{name: "truncated to half", data: good[:len(good)/2], reason: snapTruncated},
		{name: "truncated by one byte", data: good[:len(good)-1], reason: snapTruncated},
		{name: "one byte more", data: append(bytes.Clone(good), 0), reason: snapTruncated},
		{name: "the layout before the framing", data: unframed, reason: statefile.ReasonPreviousFormat},
		{name: "corrupt header", data: flip(10), reason: snapCorrupt},
		{name: "corrupt body", data: flip(len(good) / 2), reason: snapCorrupt},
		{name: "corrupt checksum", data: flip(len(good) - 1), reason: snapCorrupt},
		{name: "not a snapshot", data: bytes.Repeat([]byte("kube"), 100), reason: statefile.ReasonUnknownFormat},
		{name: "wrong version", reason: statefile.ReasonVersion, data: reframe(newer, func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			return l
		})},
		{name: "foreign node", reason: snapForeign, data: reencode(func(h *snapshotHeader, l []snapshotList) []snapshotList {
			h.NodeName = "node7"
			return l
		})},
		{name: "foreign upstream", reason: snapForeign, data: reencode(func(h *snapshotHeader, l []snapshotList) []snapshotList {
			h.Upstream = "https://10.0.0.1:6443"
			return l
		})},
		{name: "foreign Node object", reason: snapForeign, data: reencode(func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			l[3].items = []Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node7", ResourceVersion: "1"}}}
			return l
		})},
		{name: "a Secret in a section", reason: snapInvalid, data: reencode(func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			l[0].res, l[0].section.Objects = secretList, 1
			return l
		})},
		{name: "section missing", reason: snapInvalid, data: reencode(func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			return l[:3]
		})},
		{name: "count mismatch", reason: snapInvalid, data: reencode(func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			l[1].section.Objects++
			return l
		})},
		{name: "object newer than its section", reason: snapInvalid, data: reencode(func(_ *snapshotHeader, l []snapshotList) []snapshotList {
			l[2].section.At = 1
			l[2].section.From = 1
			return l
		})},
		{name: "a directory", dir: true, reason: statefile.ReasonNotRegular},
		{name: "a FIFO", fifo: true, reason: statefile.ReasonNotRegular},
		{name: "too old", data: good, maxAge: time.Nanosecond, reason: "too-old"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := newTestPersister(dir, 5000)
			p.maxAge = c.maxAge
			switch {
			case c.dir:
				if err := os.Mkdir(p.path(), 0o700); err != nil {
					t.Fatal(err)
				}
			case c.fifo:
				if err := syscall.Mkfifo(p.path(), 0o600); err != nil {
					t.Fatal(err)
				}
			case c.data != nil:
				if err := os.WriteFile(p.path(), c.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs lineLogger
			if sn := p.load(logs.logger()); sn != nil {
				t.Fatalf("bad snapshot loaded: %+v", sn.header)
			}
			lines := logs.all()
			if len(lines) != 1 || !strings.Contains(lines[0], c.reason) {
				t.Fatalf("log lines %q, want one naming %q", lines, c.reason)
			}
		})
	}
}

// TestSeededStoreResume: a watch resumes from the snapshot's versions only;
// any other version of the previous process is too old; re-setting a seeded
// object unchanged emits nothing; unconfirmed seeded objects are DELETED.
func TestSeededStoreResume(t *testing.T) {
	clock := NewClock(10_000)
	st := NewStore(ResourceServices, clock, func() Object { return &corev1.Service{} }, nil, LogLimits{Bytes: DefaultEventLogBytes, MaxLagBytes: DefaultWatchMaxLagBytes})
	a, b := testService("a"), testService("b")
	a.ResourceVersion, b.ResourceVersion = "90", "95"
	if err := st.Seed(map[string]Object{"ns/a": a, "ns/b": b}, 95, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Seed(nil, 1, 2); err == nil {
		t.Fatal("seeding twice succeeded")
	}
	if st.Set("ns/a", testService("a")) {
		t.Fatal("unchanged seeded object emitted an event")
	}
	changed := testService("a")
	changed.Labels["a"] = "c"
	if !st.Set("ns/a", changed) {
		t.Fatal("changed object emitted no event")
	}
	if n := st.DropSeeded(); n != 1 {
		t.Fatalf("dropped %d, want 1 (ns/b)", n)
	}
	want := []watch.EventType{watch.Modified, watch.Deleted}
	for _, rv := range []uint64{95, 98, 100} {
		initial, w, err := st.Watch(WatchOptions{Mode: FromVersion, RV: rv})
		if err != nil {
			t.Fatalf("resume from %d: %v", rv, err)
		}
		st.StopWatch(w)
		var got []watch.EventType
		for _, ev := range initial {
			got = append(got, ev.Type)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("resume from %d: %v, want %v", rv, got, want)
		}
	}
	for _, rv := range []uint64{1, 94, 101, 9_999} {
		_, _, err := st.Watch(WatchOptions{Mode: FromVersion, RV: rv})
		var rvErr *rvError
		if !errors.As(err, &rvErr) || !rvErr.tooOld {
			t.Fatalf("resume from %d (outside the snapshot's [95, 100]): %v, want too old", rv, err)
		}
	}
}

// writeHelperEnv makes TestSnapshotWriteHelper act: it is this test binary
// run again as another user or with a file size limit.
const writeHelperEnv = "WRAPPER_SNAPSHOT_WRITE_HELPER"

// TestSnapshotWriteHelper writes a snapshot into $WRAPPER_SNAPSHOT_WRITE_HELPER
// and reports on stdout; it is run by TestSnapshotWriteFailures.
func TestSnapshotWriteHelper(t *testing.T) {
	dir := os.Getenv(writeHelperEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	if lim := os.Getenv("FSIZE_LIMIT"); lim != "" {
		var n uint64
		fmt.Sscan(lim, &n)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			t.Fatal(err)
		}
	}
	p := newTestPersister(dir, 1000)
	fill(p)
	var logs lineLogger
	p.write(logs.logger(), time.Now())
	p.store(ResourceServices).Set("ns/other", testService("other"))
	p.write(logs.logger(), time.Now()) // a second failure is not logged again
	e, _ := p.lastError.Load().(string)
	fmt.Printf("RESULT failing=%v lines=%d lastError=%q\n", p.failing, len(logs.all()), e)
	for _, l := range logs.all() {
		fmt.Println("LOG", l)
	}
}

// TestSnapshotWriteFailures: a state directory the wrapper may not write (as
// the DaemonSet's uid 65532 in a root-owned 0755 hostPath) and a full disk
// (a file size limit) fail the write with one error line; the previous
// snapshot stays intact and no temp file is left.
func TestSnapshotWriteFailures(t *testing.T) {
	if os.Getenv(writeHelperEnv) != "" {
		t.Skip("in the helper")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, dir string, attr *syscall.SysProcAttr, env ...string) string {
		cmd := exec.Command(self, "-test.run=^TestSnapshotWriteHelper$", "-test.v")
		cmd.Env = append(os.Environ(), append(env, writeHelperEnv+"="+dir)...)
		cmd.SysProcAttr = attr
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		return string(out)
	}
	check := func(t *testing.T, out, dir, errText string) {
		t.Helper()
		if !strings.Contains(out, "RESULT failing=true lines=1 ") || !strings.Contains(out, errText) {
			t.Fatalf("helper output, want one failure line with %q:\n%s", errText, out)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
			t.Fatalf("temp files left: %v", left)
		}
	}

	t.Run("full disk", func(t *testing.T) {
		dir := t.TempDir()
		good := goodSnapshot(t, dir)
		out := run(t, dir, nil, "FSIZE_LIMIT=64")
		check(t, out, dir, "file too large")
		if b, err := os.ReadFile(filepath.Join(dir, snapshotFile)); err != nil || !bytes.Equal(b, good) {
			t.Fatalf("the previous snapshot changed: %v", err)
		}
	})
	t.Run("not writable by the wrapper's user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			check(t, run(t, dir, nil), dir, "permission denied")
			return
		}
		// As the DaemonSet runs it: uid 65532, hostPath created root-owned 0755.
		base, err := os.MkdirTemp("", "wrapper-helper-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		bin, dir := filepath.Join(base, "helper"), filepath.Join(base, "state")
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		self = bin
		check(t, run(t, dir, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}), dir, "permission denied")
	})
}

func FuzzSnapshotDecode(f *testing.F) {
	good, err := statefile.Unframe(goodSnapshot(f, f.TempDir()), snapshotFormat)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 32})
	codec := newSnapshotCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		sn, err := codec.decode(data, testNode, testUpstream)
		if err != nil {
			if !isSnapshotError(err) {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		for _, sec := range sn.header.Sections {
			if len(sn.objects[sec.Resource]) != sec.Objects {
				t.Fatalf("section %+v with %d objects", sec, len(sn.objects[sec.Resource]))
			}
		}
	})
}
