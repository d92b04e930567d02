package gridhosts

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// snapshotDNS is one CoreDNS of TestSnapshotRestartOffline: gridhosts (with
// or without a snapshot) in front of kubernetes, as on an edge node.
type snapshotDNS struct {
	server, ready, metrics string
	proc                   *coreDNS
}

func startSnapshotDNS(t *testing.T, bin, kubeconfig, snapshot string) *snapshotDNS {
	t.Helper()
	port, ready, metrics := freePort(t), freePort(t), freePort(t)
	opt := ""
	if snapshot != "" {
		opt = "    snapshot " + snapshot + " 1s\n"
	}
	corefile := fmt.Sprintf(`cluster.local:%d {
  bind 127.0.0.1
  ready 127.0.0.1:%d
  prometheus 127.0.0.1:%d
  gridhosts {
    kubeconfig %s
    node node-1
    fallthrough
%s  }
  kubernetes cluster.local {
    kubeconfig %s
  }
}
`, port, ready, metrics, kubeconfig, opt, kubeconfig)
	s := &snapshotDNS{server: fmt.Sprintf("127.0.0.1:%d", port), ready: fmt.Sprintf("http://127.0.0.1:%d/ready", ready),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)}
	// Serving DNS is enough: the kubernetes plugin is not ready while the
	// apiserver is away; gridhosts' own readiness is checked by the test.
	s.proc = startCoreDNSServing(t, bin, corefile, s.server)
	return s
}

// stop ends the process as the kubelet does (SIGTERM-like interrupt) and
// waits: gridhosts writes its last state on shutdown.
func (s *snapshotDNS) stop(t *testing.T) {
	t.Helper()
	s.proc.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.proc.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("coredns did not stop")
	}
}

// gridhostsReady reports whether the ready plugin does not list gridhosts
// (the kubernetes plugin may be listed: it has no snapshot).
func (s *snapshotDNS) gridhostsReady() (bool, string) {
	code, body := readyState(s.ready)
	return code == http.StatusOK || (code != 0 && !strings.Contains(body, pluginName)), fmt.Sprintf("%d %s", code, body)
}

// metric returns the value of one gridhosts series (name with its labels).
func (s *snapshotDNS) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, err := s.metricValue(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricValue is metric, with an error for a series not (yet) exported.
func (s *snapshotDNS) metricValue(name string) (float64, error) {
	resp, err := http.Get(s.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// TestSnapshotRestartOffline: an edge node's CoreDNS restarts while the
// apiserver is away. With a snapshot it answers grid names and the headless
// grid Service from it at once (ready, age in the metric, one log line);
// without one (the same Corefile minus the option) it can only stay
// never-worse: SERVFAIL for unified names, the next plugin's answer for the
// rest. When the apiserver returns, answers switch to live data, and what
// only the snapshot still held is gone.
func TestSnapshotRestartOffline(t *testing.T) {
	t.Parallel() // its own control plane
	c := startCluster(t)
	c.seedDemo(t)
	ctx := t.Context()
	must(c.kube.CoreV1().Services("default").Create(ctx, newService("default", "hl", "zone1", true), metav1.CreateOptions{}))(t)
	must(c.kube.DiscoveryV1().EndpointSlices("default").Create(ctx, newSlice("default", "hl-1", "hl", 8080,
		testEndpoint{IP: "10.5.1.1", Node: "node-1", Hostname: "hl-a", Ready: true},
		testEndpoint{IP: "10.5.2.1", Node: "node-2", Hostname: "hl-b", Ready: true},
	), metav1.CreateOptions{}))(t)
	bin := coreDNSBinary(t)
	snapPath := filepath.Join(t.TempDir(), "state", "gridhosts.snapshot")
	if err := os.Mkdir(filepath.Dir(snapPath), 0o700); err != nil {
		t.Fatal(err)
	}
	hlName := "hl.default.svc.cluster.local."
	hlSRV := "_http._tcp.hl.default.svc.cluster.local."

	t.Run("online: answers and writes the snapshot", func(t *testing.T) {
		d := startSnapshotDNS(t, bin, c.cp.Kubeconfig, snapPath)
		expect(t, "", d.server, demoNames(0), dns.TypeA, "10.0.1.1")
		expect(t, "", d.server, hlName, dns.TypeA, "10.5.1.1")
		poll(t, 30*time.Second, "snapshot written", func() error {
			st, err := os.Stat(snapPath)
			if err != nil {
				return err
			}
			if st.Mode().Perm() != 0o600 {
				t.Fatalf("snapshot mode %v, want 0600", st.Mode().Perm())
			}
			return nil
		})
		// Ordinal 1 goes away while this CoreDNS still runs: its last
		// write (at shutdown) no longer holds it.
		if err := c.kube.CoreV1().Pods("default").Delete(ctx, "statefulsetgrid-demo-nodeunit1-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		expect(t, "", d.server, demoNames(1), dns.TypeA)
		d.stop(t)
	})

	// Ordinal 2 goes away after the last write: only the snapshot holds it.
	if err := c.kube.CoreV1().Pods("default").Delete(ctx, "statefulsetgrid-demo-nodeunit1-2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	c.cp.StopAPIServer()

	// Started here, not in the subtest: it runs until the end.
	withSnap := startSnapshotDNS(t, bin, c.cp.Kubeconfig, snapPath)
	t.Run("offline restart with the snapshot", func(t *testing.T) {
		expect(t, "", withSnap.server, demoNames(0), dns.TypeA, "10.0.1.1")
		expect(t, "", withSnap.server, demoNames(2), dns.TypeA, "10.0.1.3")
		expect(t, "", withSnap.server, hlName, dns.TypeA, "10.5.1.1")
		expect(t, "", withSnap.server, hlSRV, dns.TypeSRV, "8080 hl-a.hl.default.svc.cluster.local.")
		if ok, state := withSnap.gridhostsReady(); !ok {
			t.Fatalf("gridhosts not ready while serving the snapshot: %s", state)
		}
		if v := withSnap.metric(t, "coredns_gridhosts_snapshot_serving"); v != 1 {
			t.Fatalf("snapshot_serving %v, want 1", v)
		}
		if v := withSnap.metric(t, "coredns_gridhosts_snapshot_age_seconds"); v <= 0 {
			t.Fatalf("snapshot_age_seconds %v, want > 0", v)
		}
		if n := strings.Count(withSnap.proc.Log.String(), "answering grid names from the snapshot"); n != 1 {
			t.Fatalf("%d log lines about serving the snapshot, want 1", n)
		}
	})

	t.Run("offline restart without the snapshot", func(t *testing.T) {
		without := startSnapshotDNS(t, bin, c.cp.Kubeconfig, "")
		if code := rcodeOf(t, without.server, demoNames(0), dns.TypeA); code != dns.RcodeServerFailure {
			t.Fatalf("unified name without a snapshot: %s, want SERVFAIL (never worse)", dns.RcodeToString[code])
		}
		if ok, state := without.gridhostsReady(); ok {
			t.Fatalf("gridhosts ready without sync or snapshot: %s", state)
		}
		without.stop(t)
	})

	t.Run("apiserver back: live answers", func(t *testing.T) {
		if err := c.cp.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		c.setPodIPs(t, "default", "statefulsetgrid-demo-nodeunit1-0", "10.0.1.77")
		expect(t, "", withSnap.server, demoNames(0), dns.TypeA, "10.0.1.77")
		expect(t, "", withSnap.server, demoNames(2), dns.TypeA) // only the snapshot held it
		expect(t, "", withSnap.server, hlName, dns.TypeA, "10.5.1.1")
		if v := withSnap.metric(t, "coredns_gridhosts_snapshot_serving"); v != 0 {
			t.Fatalf("snapshot_serving %v after sync, want 0", v)
		}
		if !strings.Contains(withSnap.proc.Log.String(), "replacedSnapshot=true") {
			t.Fatalf("no log line about replacing the snapshot:\n%s", withSnap.proc.Log.String())
		}
		// The live state is written back: the next restart finds 10.0.1.77.
		poll(t, 30*time.Second, "live state written", func() error {
			_, b, err := snapshot.Read(snapPath, snapshot.Owner{Node: "node-1", Zones: []string{"cluster.local."}})
			if err != nil {
				return err
			}
			for _, p := range b.Pods {
				if p.Meta.Name == "statefulsetgrid-demo-nodeunit1-0" && len(p.IPs) == 1 && p.IPs[0].String() == "10.0.1.77" {
					return nil
				}
			}
			return fmt.Errorf("snapshot does not hold the new address yet")
		})
	})
}
