package gridhosts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestSnapshotTrust: a snapshot is answered from only while the apiserver
// cannot be reached (package snapshottrust, the wrapper's rule). On a real
// apiserver: one that refuses gridhosts' credentials (an outage would not)
// and one whose node-1 was re-registered (another UID: the snapshot is not
// its state) are both refused with their reason, gridhosts stays not ready
// until its informers are known, and the snapshot's answers are never given.
func TestSnapshotTrust(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	bin := coreDNSBinary(t)
	snapshot := filepath.Join(t.TempDir(), "gridhosts.snapshot")

	d := startSnapshotDNS(t, bin, c.cp.Kubeconfig, snapshot)
	expect(t, "", d.server, demoNames(0), dns.TypeA, "10.0.1.1")
	poll(t, 30*time.Second, "snapshot written", func() error { _, err := os.Stat(snapshot); return err })
	d.stop(t)
	// Only the snapshot still holds this address once it is changed.
	c.setPodIPs(t, "default", "statefulsetgrid-demo-nodeunit1-0", "10.0.1.99")

	t.Run("apiserver refuses the credentials", func(t *testing.T) {
		cfg, err := clientcmd.LoadFromFile(c.cp.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range cfg.AuthInfos {
			a.ClientCertificate, a.ClientCertificateData, a.ClientKey, a.ClientKeyData = "", nil, "", nil
			a.Token = "not-a-token-this-apiserver-knows"
		}
		bad := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*cfg, bad); err != nil {
			t.Fatal(err)
		}
		r := startSnapshotDNS(t, bin, bad, snapshot)
		poll(t, 30*time.Second, "refusal counted", func() error {
			v, err := r.metricValue(`coredns_gridhosts_snapshots_refused_total{reason="upstream-refuses"}`)
			if err == nil && v != 1 {
				err = fmt.Errorf("snapshots_refused_total{upstream-refuses} %v, want 1", v)
			}
			return err
		})
		if code := rcodeOf(t, r.server, demoNames(0), dns.TypeA); code != dns.RcodeServerFailure {
			t.Fatalf("unified name with a refusing apiserver: %s, want SERVFAIL (the snapshot is not answered from)", dns.RcodeToString[code])
		}
		if ok, state := r.gridhostsReady(); ok {
			t.Fatalf("gridhosts ready on a refused snapshot: %s", state)
		}
		if v := r.metric(t, "coredns_gridhosts_snapshot_serving"); v != 0 {
			t.Fatalf("snapshot_serving %v, want 0", v)
		}
		if !strings.Contains(r.proc.Log.String(), "Not answering from the snapshot") {
			t.Fatalf("no log line about the refusal:\n%s", r.proc.Log.String())
		}
		r.stop(t)
	})

	t.Run("node re-registered: another identity", func(t *testing.T) {
		n := must(c.kube.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{}))(t)
		if err := c.kube.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		n.ResourceVersion, n.UID = "", ""
		must(c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}))(t)
		r := startSnapshotDNS(t, bin, c.cp.Kubeconfig, snapshot)
		poll(t, 30*time.Second, "refusal counted", func() error {
			v, err := r.metricValue(`coredns_gridhosts_snapshots_refused_total{reason="identity"}`)
			if err == nil && v != 1 {
				err = fmt.Errorf("snapshots_refused_total{identity} %v, want 1", v)
			}
			return err
		})
		// Live answers, never the snapshot's 10.0.1.1.
		expect(t, "", r.server, demoNames(0), dns.TypeA, "10.0.1.99")
		if strings.Contains(r.proc.Log.String(), "answering grid names from the snapshot") {
			t.Fatalf("the snapshot was answered from:\n%s", r.proc.Log.String())
		}
		r.stop(t)
	})
}

// TestSnapshotMaxAge: snapshot_max_age refuses an older snapshot as too-old
// before the apiserver is asked anything; 0 lets any age through to the
// apiserver's check (an address nothing listens on: an outage, served).
func TestSnapshotMaxAge(t *testing.T) {
	g := New([]string{"cluster.local."})
	g.Node = "node-1"
	if err := g.watch(&rest.Config{Host: "http://127.0.0.1:9"}, nil); err != nil {
		t.Fatal(err)
	}
	g.snapshot = snapshot.NewWriter(filepath.Join(t.TempDir(), "gridhosts.snapshot"), time.Minute, demoOwner)
	g.snapshot.Life.MaxAge = time.Hour
	old := snapshot.Header{Written: time.Now().Add(-2 * time.Hour)}
	if v := g.trustSnapshot(t.Context(), old, &snapshot.Body{}); v.Serve || v.Reason != "too-old" {
		t.Fatalf("two hours old, snapshot_max_age 1h: %+v, want too-old", v)
	}
	if v := g.trustSnapshot(t.Context(), snapshot.Header{Written: time.Now().Add(-30 * time.Minute)}, &snapshot.Body{}); !v.Serve {
		t.Fatalf("half an hour old, snapshot_max_age 1h, apiserver away: %+v, want served", v)
	}
	g.snapshot.Life.MaxAge = 0
	if v := g.trustSnapshot(t.Context(), old, &snapshot.Body{}); !v.Serve {
		t.Fatalf("snapshot_max_age 0, apiserver away: %+v, want any age served", v)
	}
}
