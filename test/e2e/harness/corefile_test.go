package harness

import (
	"strings"
	"testing"
)

func TestAdaptCorefile(t *testing.T) {
	shipped := `# comment
.:53 {
    bind 169.254.20.10
    errors
    health {
        lameduck 5s
    }
    ready
    prometheus :9153
    gridhosts cluster.local {
        node {$NODE_NAME}
        services_kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig
        fallthrough
        snapshot /var/lib/coredns-gridhosts/gridhosts.snapshot 30s
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig
        pods insecure
    }
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    forward . 8.8.8.8
    cache 30
}
`
	got, err := adaptCorefile(shipped, "10.250.1.10", "/k/admin.kubeconfig", "/t/gridhosts-node-1.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	want := `# comment
.:53 {
    bind 10.250.1.10
    errors
    health 127.0.0.1:8080 {
        lameduck 5s
    }
    ready 127.0.0.1:8181
    prometheus 127.0.0.1:9153
    gridhosts cluster.local {
        kubeconfig /k/admin.kubeconfig
        node {$NODE_NAME}
        fallthrough
        snapshot /t/gridhosts-node-1.snapshot 30s
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig /k/admin.kubeconfig
        pods insecure
    }
    cache 30
}
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}

	// The node CoreDNS: the shipped kubeconfig lines stay (its node's
	// wrapper), in-cluster config elsewhere.
	got, err = adaptCorefile(shipped, "10.250.1.10", "", "/t/gridhosts-node-1.snapshot")
	if err != nil {
		t.Fatal(err)
	}
	want = strings.NewReplacer("        kubeconfig /k/admin.kubeconfig\n        node {$NODE_NAME}\n",
		"        node {$NODE_NAME}\n        services_kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig\n",
		"        kubeconfig /k/admin.kubeconfig\n        pods insecure\n",
		"        kubeconfig /var/lib/application-grid-wrapper/pki/dns.kubeconfig\n        pods insecure\n").Replace(want)
	if got != want {
		t.Fatalf("node CoreDNS: got:\n%s\nwant:\n%s", got, want)
	}

	if _, err := adaptCorefile(".:53 {\n    hosts\n}\n", "10.0.0.1", "k", "s"); err == nil || !strings.Contains(err.Error(), "gridhosts block false") {
		t.Fatalf("a Corefile without gridhosts must be refused, got %v", err)
	}
}
