package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/servicegroup/servicegroup/test/e2e/harness"
)

// TestFabric builds the test network alone and checks its promises: nodes
// reach each other and the root namespace's fabric address, nothing else;
// the root namespace gains one link with a connected route only; teardown
// leaves nothing behind.
func TestFabric(t *testing.T) {
	t.Parallel() // its own network
	requireHost(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	f, err := harness.NewFabric(ctx, harness.FabricOptions{Nodes: []string{"node0", "node1"}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			f.Close()
		}
	})
	n0, n1 := f.Nodes[0], f.Nodes[1]

	// node1 serves on its fabric address; node0 reaches it.
	l, err := n1.NS.Listen("tcp", net.JoinHostPort(n1.IP.String(), "8080"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from node1 "+r.RemoteAddr)
	})}
	go srv.Serve(l)
	defer srv.Close()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n0.NS.DialContext}}
	resp, err := client.Get("http://" + net.JoinHostPort(n1.IP.String(), "8080"))
	if err != nil {
		t.Fatalf("node0 -> node1: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "hello from node1 " + n0.IP.String() + ":"; !strings.HasPrefix(string(body), want) {
		t.Fatalf("node0 -> node1 answered %q, want prefix %q", body, want)
	}
	// The listener really is inside node1: the root namespace has no such address.
	if addrs, _ := exec.CommandContext(ctx, "ip", "-4", "-o", "addr", "show").Output(); strings.Contains(string(addrs), " "+n1.IP.String()+"/") {
		t.Fatalf("node address %s leaked into the root namespace:\n%s", n1.IP, addrs)
	}

	// Nodes reach the root namespace's fabric address (where the apiserver listens).
	rl, err := net.Listen("tcp", net.JoinHostPort(f.RootIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	go func() {
		if c, err := rl.Accept(); err == nil {
			io.WriteString(c, "root")
			c.Close()
		}
	}()
	out, err := n0.NS.Run(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+f.RootIP.String()+"/"+portString(rl.Addr())+"; head -c4 <&3")
	if err != nil || out != "root" {
		t.Fatalf("node0 -> root %s: %q, %v", rl.Addr(), out, err)
	}

	// No default route in a node namespace, and its routes stay in the fabric.
	routes, err := n0.NS.Run(ctx, "ip", "-4", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(routes, "default") {
		t.Fatalf("node0 has a default route:\n%s", routes)
	}
	if !strings.Contains(routes, "10.96.0.0/16 via "+f.GatewayIP.String()) {
		t.Fatalf("node0 lacks the service CIDR route into the fabric:\n%s", routes)
	}
	if !strings.Contains(routes, n1.PodCIDR.String()+" via "+n1.IP.String()) {
		t.Fatalf("node0 lacks the route to node1's pod CIDR:\n%s", routes)
	}

	// The root namespace's only new route is the connected one.
	rootRoutes, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "dev", f.RootLink).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(rootRoutes)), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], f.Subnet.String()+" proto kernel scope link") {
		t.Fatalf("root routes via %s: %q, want only the connected %s", f.RootLink, rootRoutes, f.Subnet)
	}

	f.Close()
	closed = true
	srv.Close()
	assertTornDown(t, f)
}

func portString(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
