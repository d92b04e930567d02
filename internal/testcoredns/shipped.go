package testcoredns

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// Shipped is one of corefile/'s ready Corefiles adapted to run in a test.
type Shipped struct {
	Text        string
	Port, Ready int
	// Snapshot is the file the node's hostPath became; WantSnapshot: the
	// Corefile keeps one.
	Snapshot     string
	WantSnapshot bool
}

// Server is the address it answers on.
func (s Shipped) Server() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// ReadyURL is its ready plugin's.
func (s Shipped) ReadyURL() string { return fmt.Sprintf("http://127.0.0.1:%d/ready", s.Ready) }

// ShippedCorefile is corefile/FILE with only addresses and credentials
// changed: gridhosts reads kubeconfig; Services and EndpointSlices (in
// Corefile.node: gridhosts' services_kubeconfig and the kubernetes plugin,
// the node wrapper's DNS view there) are read with services.
func ShippedCorefile(t testing.TB, file, kubeconfig, services string) Shipped {
	t.Helper()
	data, err := testbin.ReadRepoFile("corefile", file)
	if err != nil {
		t.Fatal(err)
	}
	port, health, ready, prom := FreePort(t), FreePort(t), FreePort(t), FreePort(t)
	text := string(data)
	replacements := [][2]string{
		{".:53 {", fmt.Sprintf(".:%d {\n    bind 127.0.0.1", port)},
		{"health {", fmt.Sprintf("health 127.0.0.1:%d {", health)},
		{"    ready\n", fmt.Sprintf("    ready 127.0.0.1:%d\n", ready)},
		{"prometheus 127.0.0.1:9153", fmt.Sprintf("prometheus 127.0.0.1:%d", prom)},
		{"gridhosts cluster.local {", "gridhosts cluster.local {\n        kubeconfig " + kubeconfig},
		{"kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubernetes cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig " + services},
		{"forward . /etc/resolv.conf", "forward . 127.0.0.1:9"},
	}
	if file == "Corefile.node" { // host network, node-local address, the wrapper's DNS view
		replacements = [][2]string{
			{".:53 {\n    bind 169.254.20.10", fmt.Sprintf(".:%d {\n    bind 127.0.0.1", port)},
			{"health 127.0.0.1:8080 {", fmt.Sprintf("health 127.0.0.1:%d {", health)},
			{"ready 127.0.0.1:8181", fmt.Sprintf("ready 127.0.0.1:%d", ready)},
			{"prometheus 127.0.0.1:9153", fmt.Sprintf("prometheus 127.0.0.1:%d", prom)},
			{"gridhosts cluster.local {", "gridhosts cluster.local {\n        kubeconfig " + kubeconfig},
			{"services_kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig", "services_kubeconfig " + services},
			{"    kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig", "    kubeconfig " + services},
			{"forward . /etc/resolv.conf", "forward . 127.0.0.1:9"},
		}
	}
	for _, r := range replacements {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("%s: no %q to adapt", file, r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	// The node's hostPath becomes a file of this test.
	const shippedSnapshot = "snapshot /var/lib/coredns-gridhosts/gridhosts.snapshot"
	snapshot := filepath.Join(t.TempDir(), "gridhosts.snapshot")
	wantSnapshot := strings.Contains(text, shippedSnapshot)
	text = strings.Replace(text, shippedSnapshot, "snapshot "+snapshot, 1)
	return Shipped{Text: text, Port: port, Ready: ready, Snapshot: snapshot, WantSnapshot: wantSnapshot}
}
