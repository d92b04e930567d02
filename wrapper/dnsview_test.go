package wrapper

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// TestSnapshotDNSSections: the DNS view's unfiltered slices and Namespaces
// round-trip as two more sections; a snapshot of an older wrapper (without
// them) still loads, one with only one of them does not.
func TestSnapshotDNSSections(t *testing.T) {
	write := func(dns ...*watchcache.Resource) string {
		dir := t.TempDir()
		p := newTestPersister(dir, 1000)
		for _, r := range dns {
			p.addTestStore(r)
		}
		fill(p)
		for _, r := range dns {
			switch r {
			case dnsSlicesResource:
				p.store(dnsSlicesName).Set("ns/svc-1", testSlice("svc-1", "10.1.0.1", "10.9.0.9"))
			case watchcache.Namespaces:
				p.store(watchcache.ResourceNamespaces).Set("ns", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
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

	dir := write(dnsSnapshotResources...)
	sn, logs := load(dir)
	if sn == nil {
		t.Fatalf("snapshot with the DNS view's sections not loaded: %v", logs)
	}
	if sl, ok := sn.Objects[dnsSlicesName]["ns/svc-1"].(*discoveryv1.EndpointSlice); !ok || len(sl.Endpoints) != 2 {
		t.Fatalf("DNS slices: %v", sn.Objects[dnsSlicesName])
	}
	if _, ok := sn.Objects[watchcache.ResourceNamespaces]["ns"]; !ok {
		t.Fatalf("namespaces: %v", sn.Objects[watchcache.ResourceNamespaces])
	}

	dir = write()
	if sn, logs := load(dir); sn == nil {
		t.Fatalf("an older wrapper's snapshot not loaded: %v", logs)
	} else if _, ok := sn.Objects[watchcache.ResourceNamespaces]; ok {
		t.Fatal("an older wrapper's snapshot has Namespaces")
	}

	dir = write(watchcache.Namespaces)
	if sn, logs := load(dir); sn != nil || !strings.Contains(strings.Join(logs, "\n"), "sections") {
		t.Fatalf("a snapshot with only some of the DNS view's sections: loaded %v, logs %v", sn != nil, logs)
	}
}
