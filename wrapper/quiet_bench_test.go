package wrapper_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/benchrecord"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper"
)

// dialInNetns opens a TCP connection from inside network namespace ns.
func dialInNetns(ns, addr string) (c net.Conn, err error) {
	err = inNetns(ns, func() error {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	return c, err
}

// relayIntoNetns makes the host's loopback address addr reachable at the
// same address inside ns: a TCP relay, so a kube-proxy in ns can reach the
// apiserver directly.
func relayIntoNetns(b *testing.B, ns, addr string) {
	b.Helper()
	ln, err := listenInNetns(ns, addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}

// syncs returns kube-proxy's count of rule syncs from its own /metrics
// (kubeproxy_sync_proxy_rules_duration_seconds_count, summed over labels).
func (k *kubeProxyInNetns) syncs(b *testing.B) float64 {
	b.Helper()
	k.alive(b)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return dialInNetns(k.ns, "127.0.0.1:10249") },
	}}
	resp, err := c.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		b.Fatalf("kube-proxy metrics in %s: %v", k.ns, err)
	}
	defer resp.Body.Close()
	const name = "kubeproxy_sync_proxy_rules_duration_seconds_count"
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") {
			continue
		}
		f := strings.Fields(l)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("kube-proxy metric line %q: %v", l, err)
		}
		sum, found = sum+n, true
	}
	if !found {
		b.Fatalf("kube-proxy in %s has no %s", k.ns, name)
	}
	return sum
}

// programmed reports whether kube-proxy's NAT rules send traffic to ip.
func (k *kubeProxyInNetns) programmed(ctx context.Context, ip string) (bool, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", k.ns, "iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%v: %s", err, out)
	}
	return strings.Contains(string(out), "--to-destination "+ip+":8080"), nil
}

// BenchmarkQuietForeignChanges makes foreign-nodeunit changes (a pod
// becoming ready on node1, in another nodeunit than node0) and one local
// change, with the EndpointSlices made from the pods by
// kube-controller-manager's endpointslice controller (which rewrites
// endpoints.kubernetes.io/last-change-trigger-time with each), and
// reports, in the same run: the watch events per change an unfiltered watch
// on the apiserver gets, those a watch through node0's wrapper gets, and
// (as root, with the kube-proxy binary) the rule syncs per change of a real
// kube-proxy for node0 pointed at the apiserver directly and of one behind
// the wrapper, read from kube-proxy's own metrics. With kube-proxy the
// changes are paced: each one waits until the direct kube-proxy has
// programmed it, so every change can cost it a sync.
func BenchmarkQuietForeignChanges(b *testing.B) {
	benchRec := benchrecord.Start(b, "docs/benchmarks/wrapper-quiet-foreign-changes.md")
	const foreign = 10
	ns := "quietbench"
	cp, admin := startQuietService(b, ns)
	readyAt := time.Now().Add(-24 * time.Hour)
	next := func() time.Time { readyAt = readyAt.Add(time.Minute); return readyAt }
	readyPod(b, admin, ns, "quiet", "local-0", "node0", "10.5.0.1", next())
	readyPod(b, admin, ns, "quiet", "foreign-0", "node1", "10.5.0.2", next())
	addresses := 2
	eventually(b, "the endpointslice controller's slice lists both pods", convergeFloor, func(ctx context.Context) (bool, error) {
		return sliceAddresses(ctx, admin, ns, "svc") == addresses, nil
	})

	var direct, behind *kubeProxyInNetns
	proxyBin, err := controlplane.Binary(controlplane.KubeProxy)
	_, ipErr := exec.LookPath("ip")
	_, iptErr := exec.LookPath("iptables-save")
	withKubeProxy := err == nil && ipErr == nil && iptErr == nil && os.Geteuid() == 0
	if !withKubeProxy {
		b.Logf("kube-proxy part skipped: needs root, ip, iptables-save and the kube-proxy binary (%v)", err)
	}
	w := startWrapper(b, cp, "node0", "", wrapper.Options{})
	if withKubeProxy {
		nsDirect, nsBehind := newNetns(b, "sgqd"), newNetns(b, "sgqw")
		u, err := url.Parse(cp.URL)
		if err != nil {
			b.Fatal(err)
		}
		relayIntoNetns(b, nsDirect, u.Host)
		certPEM, keyPEM := cp.AdminCertificate()
		directKC, err := cp.WriteKubeconfig("kube-proxy-direct.kubeconfig", cp.URL, certPEM, keyPEM)
		if err != nil {
			b.Fatal(err)
		}
		relayIntoNetns(b, nsBehind, w.addr)
		behindKC := wrapperKubeconfig(b, w.addr)
		direct = startKubeProxyInNetns(b, proxyBin, nsDirect, directKC)
		behind = startKubeProxyInNetns(b, proxyBin, nsBehind, behindKC)
		for _, k := range []*kubeProxyInNetns{direct, behind} {
			eventually(b, "kube-proxy in "+k.ns+" programs node0's endpoint", 60*time.Second, func(ctx context.Context) (bool, error) {
				k.alive(b)
				return k.programmed(ctx, "10.5.0.1")
			})
		}
	}

	// One pod becomes ready; its slice write is awaited, so each change is
	// one write of the controller.
	podReady := func(name, node, ip string) {
		readyPod(b, admin, ns, "quiet", name, node, ip, next())
		addresses++
		eventually(b, fmt.Sprintf("%d addresses upstream", addresses), convergeFloor, func(ctx context.Context) (bool, error) {
			return sliceAddresses(ctx, admin, ns, "svc") == addresses, nil
		})
	}

	for i := range b.N {
		upstream := watchSlicesFrom(b, admin.DiscoveryV1().EndpointSlices(ns))
		served := watchSlicesFrom(b, clientFor(b, w.URL(), protobuf).DiscoveryV1().EndpointSlices(ns))
		var directBefore, behindBefore float64
		if withKubeProxy {
			directBefore, behindBefore = direct.syncs(b), behind.syncs(b)
		}
		for j := range foreign {
			ip := fmt.Sprintf("10.5.%d.%d", 1+i, j)
			podReady(fmt.Sprintf("foreign-%d-%d", i, j), "node1", ip)
			if withKubeProxy {
				eventually(b, "the direct kube-proxy programs "+ip, 60*time.Second, func(ctx context.Context) (bool, error) {
					direct.alive(b)
					return direct.programmed(ctx, ip)
				})
			}
		}
		sentinel := fmt.Sprintf("10.5.100.%d", i)
		podReady(fmt.Sprintf("local-%d", i+1), "node0", sentinel)
		up, down := eventsUntil(b, upstream, sentinel), eventsUntil(b, served, sentinel)
		// The last event of each is the local change.
		benchRec.Report(float64(up-1)/foreign, "apiserver-events/foreign-change")
		benchRec.Report(float64(down-1)/foreign, "wrapper-events/foreign-change")
		benchRec.Report(float64(down-1)/float64(up-1), "events-ratio")
		b.Logf("%d foreign changes + 1 local: apiserver %d events, wrapper for node0 %d", foreign, up, down)
		if withKubeProxy {
			for _, k := range []*kubeProxyInNetns{direct, behind} {
				eventually(b, "kube-proxy in "+k.ns+" programs the local change", 60*time.Second, func(ctx context.Context) (bool, error) {
					k.alive(b)
					return k.programmed(ctx, sentinel)
				})
			}
			d, wv := direct.syncs(b)-directBefore, behind.syncs(b)-behindBefore
			// Totals for the foreign changes and the local one together
			// (plus any periodic resync that fell in between).
			benchRec.Report(d, "direct-kube-proxy-syncs")
			benchRec.Report(wv, "behind-wrapper-kube-proxy-syncs")
			benchRec.Report(wv/d, "kube-proxy-syncs-ratio")
			b.Logf("kube-proxy rule syncs for them: direct %v, behind the wrapper %v", d, wv)
		}
	}
}
