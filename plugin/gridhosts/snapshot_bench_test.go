package gridhosts

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/informers"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

// snapshotBenchPods is the scale of the snapshot benchmarks: grid pods of
// one nodeunit (node view), as BenchmarkMemory's largest size.
const snapshotBenchPods = 10000

// benchIndex is an index of n grid pods built from the same API objects
// the informers deliver, and the unified names they answer.
func benchIndex(n int) (*index.Index, []string) {
	x := index.New(index.Options{})
	grid := newGrid("default", "statefulsetgrid-demo", "zone1", "ssg-uid")
	set := newSet(grid, "nodeunit1", demoSvc, "set-uid", int32(n))
	for _, o := range []any{grid, set, newService("default", demoSvc, "zone1", false),
		newNode("node-1", map[string]string{"zone1": "nodeunit1"}, "10.0.0.1")} {
		x.Upsert(o)
	}
	names := make([]string, n)
	for i := range n {
		p := newPod(set, i, "node-1", memoryPodIP(i))
		p.UID = types.UID(fmt.Sprintf("pod-uid-%d", i))
		x.Upsert(p)
		names[i] = fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", i, demoSvc)
	}
	return x, names
}

// BenchmarkSnapshotWrite is the cost of one snapshot write of 10k grid
// pods (collect under the read lock, encode, checksum, temporary file,
// fsync, rename) against the old pipeline's equivalent: the
// statefulset-grid-daemon's hosts file of the same names, formatted and
// written the same durable way. Both subbenchmarks run in one process;
// compare their ns/op (bytes/op is the file size).
func BenchmarkSnapshotWrite(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/gridhosts-snapshot.md")
	x, names := benchIndex(snapshotBenchPods)
	dir := b.TempDir()
	b.Run("snapshot", func(b *testing.B) {
		benchRec.PerOp(b)
		s := snapshot.NewWriter(filepath.Join(dir, "gridhosts.snapshot"), time.Minute, demoOwner)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Write(x, true); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := os.Stat(s.Path)
		benchRec.ReportOn(b, float64(st.Size()), "file-bytes")
	})
	b.Run("hostsfile", func(b *testing.B) {
		benchRec.PerOp(b)
		path := filepath.Join(dir, "hosts")
		b.ReportAllocs()
		for b.Loop() {
			var sb strings.Builder
			for i, name := range names {
				q := index.MemberQuery{Namespace: "default", Grid: "statefulsetgrid-demo", Ordinal: fmt.Sprint(i), Service: demoSvc}
				if m := x.Member(&index.Viewer{Node: "node-1"}, &q); m.Pod != nil {
					fmt.Fprintf(&sb, "%s %s\n", m.Pod.IPs[0], strings.TrimSuffix(name, "."))
				}
			}
			if _, err := statefile.WriteAtomic(filepath.Dir(path), filepath.Base(path), func(w io.Writer) error {
				_, err := io.WriteString(w, sb.String())
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := os.Stat(path)
		benchRec.ReportOn(b, float64(st.Size()), "file-bytes")
	})
}

// BenchmarkSnapshotStartup is the time from nothing to an index that
// answers every unified name of 10k grid pods: read and decode the
// snapshot, against the baseline of informers listing the same objects
// from the real apiserver (what a start-up with the cloud reachable
// costs). It logs the ratio.
func BenchmarkSnapshotStartup(b *testing.B) {
	c := startCluster(b)
	ctx := context.Background()
	must(c.kube.CoreV1().Nodes().Create(ctx, newNode("node-1", map[string]string{"zone1": "nodeunit1"}, ""), metav1.CreateOptions{}))(b)
	grid := must(c.grids.SuperedgeV1().StatefulSetGrids("default").Create(ctx,
		newGrid("default", "statefulsetgrid-demo", "zone1", ""), metav1.CreateOptions{}))(b)
	must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", demoSvc, "zone1", false), metav1.CreateOptions{}))(b)
	set := must(c.kube.AppsV1().StatefulSets("default").Create(ctx,
		newSet(grid, "nodeunit1", demoSvc, "", snapshotBenchPods), metav1.CreateOptions{}))(b)
	createPodsConcurrently(b, c, set, "node-1", memoryPodIP, 0, snapshotBenchPods)
	last := fmt.Sprintf("statefulsetgrid-demo-%d.%s.default.svc.cluster.local.", snapshotBenchPods-1, demoSvc)
	answers := func(x *index.Index) {
		g := New([]string{"cluster.local."})
		g.Node = "node-1"
		g.snap.Store(x)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		g.ServeDNS(ctx, rec, new(dns.Msg).SetQuestion(last, dns.TypeA))
		if rec.Msg == nil || len(rec.Msg.Answer) != 1 {
			b.Fatalf("%s not answered: %v", last, rec.Msg)
		}
	}
	fromAPI := func() *index.Index {
		x := index.New(index.Options{NodeMode: true})
		w, err := informers.New(c.cp.Config, nil, x, false, "node-1")
		if err != nil {
			b.Fatal(err)
		}
		known := make(chan struct{})
		w.Start(klog.Background(), func() { close(known) })
		<-known
		w.Stop()
		return x
	}
	path := filepath.Join(b.TempDir(), "gridhosts.snapshot")
	if err := snapshot.NewWriter(path, time.Minute, demoOwner).Write(fromAPI(), true); err != nil {
		b.Fatal(err)
	}

	var perOp [2]time.Duration
	for i, tc := range []struct {
		name string
		run  func() *index.Index
	}{
		{"informers", fromAPI},
		{"snapshot", func() *index.Index {
			_, body, err := snapshot.Read(path, demoOwner)
			if err != nil {
				b.Fatal(err)
			}
			return body.Index(true) // node mode, as the informers' index above
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var x *index.Index
			start := time.Now()
			n := 0
			for b.Loop() {
				x = tc.run()
				n++
			}
			perOp[i] = time.Since(start) / time.Duration(n)
			answers(x)
		})
	}
	if perOp[1] > 0 {
		b.Logf("%d grid pods: informers from the apiserver %v, snapshot %v: snapshot start-up is %.1fx faster",
			snapshotBenchPods, perOp[0].Round(time.Millisecond), perOp[1].Round(time.Millisecond), float64(perOp[0])/float64(perOp[1]))
	}
}
