package wrapper

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// TestSnapshotServiceCIDRSection: ServiceCIDRs round-trip as the section
// after the DNS view's; a snapshot of an older wrapper (the DNS view's
// sections but not this one) still loads, one with ServiceCIDRs but not
// the DNS view's sections does not.
func TestSnapshotServiceCIDRSection(t *testing.T) {
	write := func(extra ...*watchcache.Resource) string {
		dir := t.TempDir()
		p := newTestPersister(dir, 1000)
		for _, r := range extra {
			p.addTestStore(r)
		}
		fill(p)
		for _, r := range extra {
			switch r {
			case watchcache.Namespaces:
				p.store(watchcache.ResourceNamespaces).Set("ns", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
			case watchcache.ServiceCIDRs:
				p.store(watchcache.ResourceServiceCIDRs).Set("kubernetes", &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
					Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}})
			}
		}
		p.Write(logr.Discard(), time.Now())
		return dir
	}
	load := func(dir string) (*snapshot.Snapshot, []string) {
		var logs []string
		logger := funcr.New(func(_, args string) { logs = append(logs, args) }, funcr.Options{Verbosity: 10})
		return newTestPersister(dir, 5000).Load(logger), logs
	}

	sn, logs := load(write(snapshotResources()[len(kubeProxyResources):]...))
	if sn == nil {
		t.Fatalf("snapshot with every section not loaded: %v", logs)
	}
	c, ok := sn.Objects[watchcache.ResourceServiceCIDRs]["kubernetes"].(*networkingv1.ServiceCIDR)
	if !ok || len(c.Spec.CIDRs) != 1 || c.Spec.CIDRs[0] != "10.96.0.0/12" {
		t.Fatalf("servicecidrs: %v", sn.Objects[watchcache.ResourceServiceCIDRs])
	}

	if sn, logs := load(write(dnsSnapshotResources...)); sn == nil {
		t.Fatalf("an older wrapper's snapshot (no ServiceCIDRs) not loaded: %v", logs)
	} else if _, ok := sn.Objects[watchcache.ResourceServiceCIDRs]; ok {
		t.Fatal("an older wrapper's snapshot has ServiceCIDRs")
	}

	if sn, logs := load(write(watchcache.ServiceCIDRs)); sn != nil || !strings.Contains(strings.Join(logs, "\n"), "sections") {
		t.Fatalf("a snapshot with ServiceCIDRs but not the DNS view's sections: loaded %v, logs %v", sn != nil, logs)
	}
}
