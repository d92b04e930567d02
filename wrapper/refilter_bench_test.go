package wrapper

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

const (
	benchServices  = 10000
	benchEndpoints = 10 // per Service: 100,000 in all
	benchNodes     = 1000
)

// benchCluster fills bare caches with 10,000 topology Services of 10
// endpoints each on 1,000 nodes in 10 nodeunits; the endpoints of the first
// `hot` Services include one on node "hot".
func benchCluster(hot int) Caches { return sizedCluster(benchServices, benchNodes, hot) }

// emptyCaches are upstream caches with nothing in them, indexed as the
// syncer needs.
func emptyCaches() Caches {
	return Caches{
		Services:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		Endpoints:      cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		EndpointSlices: cache.NewIndexer(cache.MetaNamespaceKeyFunc, sliceIndexers),
		Nodes:          cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
}

// sizedCluster is benchCluster's layout with services Services on nodes nodes.
func sizedCluster(services, nodes, hot int) Caches {
	c := emptyCaches()
	for i := range nodes {
		_ = c.Nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"zone1": fmt.Sprintf("u%d", i%10)}}})
	}
	_ = c.Nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hot", Labels: map[string]string{"zone1": "u0"}}})
	port, proto := int32(80), corev1.ProtocolTCP
	for i := range services {
		name := fmt.Sprintf("s%d", i)
		_ = c.Services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name,
			Annotations: map[string]string{superedgev1.AnnotationTopologyKeys: `["zone1"]`}}})
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
		}
		for j := range benchEndpoints {
			node := fmt.Sprintf("n%d", (i*benchEndpoints+j)%nodes)
			if j == 0 && i < hot {
				node = "hot"
			}
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}, NodeName: &node})
		}
		_ = c.EndpointSlices.Add(sl)
	}
	return c
}

func benchStores() Stores {
	clock := watchcache.NewClock(1, nil)
	mk := func(r string, f func() watchcache.Object) *watchcache.Store {
		return watchcache.NewStore(r, clock, f, nil, watchcache.LogLimits{Bytes: DefaultEventLogBytes, MaxLagBytes: DefaultWatchMaxLagBytes})
	}
	return Stores{
		Services:       mk(watchcache.ResourceServices, func() watchcache.Object { return &corev1.Service{} }),
		Endpoints:      mk(watchcache.ResourceEndpoints, func() watchcache.Object { return &corev1.Endpoints{} }),
		EndpointSlices: mk(watchcache.ResourceEndpointSlices, func() watchcache.Object { return &discoveryv1.EndpointSlice{} }),
		Nodes:          mk(watchcache.ResourceNodes, func() watchcache.Object { return &corev1.Node{} }),
	}
}

// BenchmarkRefilterNodeLabelChange measures one node label change at 10,000
// Services / 100,000 endpoints: finding the affected Services and
// re-filtering them. Finding them is a pass over one short list per
// topology Service; re-filtering follows the number of Services with an
// endpoint on the node.
func BenchmarkRefilterNodeLabelChange(b *testing.B) {
	for _, hot := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("affected=%d", hot), func(b *testing.B) {
			caches := benchCluster(hot)
			s := newSyncer("n0", caches, benchStores())
			ctx := context.Background()
			s.syncAll(ctx)
			units := []string{"u0", "u1"}
			b.ResetTimer()
			for i := range b.N {
				old := map[string]string{"zone1": units[i%2]}
				cur := map[string]string{"zone1": units[(i+1)%2]}
				_ = caches.Nodes.Update(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hot", Labels: cur}})
				keys := s.affectedByNode("hot", old, cur, false)
				if len(keys) != hot {
					b.Fatalf("%d affected, want %d", len(keys), hot)
				}
				for _, k := range keys {
					s.sync(ctx, k)
				}
			}
			b.ReportMetric(float64(hot), "services/op")
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkMemory reports the heap of the bare informer caches at 10,000
// Services / 100,000 endpoints and what the wrapper's served stores add.
func BenchmarkMemory(b *testing.B) {
	for range b.N {
		base := heapInUse()
		caches := benchCluster(0)
		withCaches := heapInUse()
		s := newSyncer("n0", caches, benchStores())
		s.syncAll(context.Background())
		withStores := heapInUse()
		b.ReportMetric(float64(withCaches-base)/(1<<20), "cache-MiB")
		b.ReportMetric(float64(withStores-base)/(1<<20), "wrapper-MiB")
		runtime.KeepAlive(s)
	}
}
