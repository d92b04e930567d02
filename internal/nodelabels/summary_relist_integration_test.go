package nodelabels

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// summaryRequests counts a client's list requests of NodeLabelSummaries,
// full (the summaries) or of their metadata, and can refuse them.
type summaryRequests struct {
	mu         sync.Mutex
	full, meta int
	refuse     bool
}

func (s *summaryRequests) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !strings.HasSuffix(r.URL.Path, "/nodelabelsummaries") {
				return next.RoundTrip(r)
			}
			s.mu.Lock()
			refuse := s.refuse
			if !refuse && r.URL.Query().Get("watch") == "" {
				if strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadataList") {
					s.meta++
				} else {
					s.full++
				}
			}
			s.mu.Unlock()
			if refuse {
				return nil, errors.New("refused by the test")
			}
			return next.RoundTrip(r)
		})
	})
	return cfg
}

func (s *summaryRequests) counts() (full, meta int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full, s.meta
}

func (s *summaryRequests) setRefuse(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = v
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSummariesRelistByMetadata: after an apiserver restart with etcd
// compacted meanwhile (every watch ends in 410), the source relists the
// summaries by their metadata alone when none changed, and in full when one
// did; either way it follows them.
func TestSummariesRelistByMetadata(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	admin := versioned.NewForConfigOrDie(cp.Config)
	for _, s := range []*struct{ name, zone string }{{"nodes-0", "a"}, {"nodes-1", "b"}} {
		if _, err := admin.SuperedgeV1().NodeLabelSummaries().Create(t.Context(),
			summary(s.name, map[string]string{"node-" + s.name: s.zone}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := &summaryRequests{}
	cfg := reqs.wrap(cp.Config)
	meta := metadata.NewForConfigOrDie(cfg)
	sink := &recorder{labels: map[string]map[string]string{}}
	src := New(versioned.NewForConfigOrDie(cfg), meta, Nodes{
		NewInformer: func() cache.SharedIndexInformer {
			return metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
		},
		Labels: func(any) (string, map[string]string, bool) { return "", nil, false },
	}, sink)
	src.Backoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	zoneOf := func(node string) (zone string) {
		src.locked(func() { zone = sink.labels[node]["zone"] })
		return zone
	}
	testwait.Eventually(t.Context(), t, time.Minute, "summaries followed", func(context.Context) error {
		if !src.HasSynced() || zoneOf("node-nodes-0") != "a" || zoneOf("node-nodes-1") != "b" {
			return fmt.Errorf("synced %v, zones %q %q", src.HasSynced(), zoneOf("node-nodes-0"), zoneOf("node-nodes-1"))
		}
		return nil
	})
	restart := func() {
		t.Helper()
		cp.StopAPIServer()
		if _, err := cp.CompactEtcd(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := cp.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing changed: the metadata tells, no summary is listed again.
	full0, meta0 := reqs.counts()
	restart()
	testwait.Eventually(t.Context(), t, 2*time.Minute, "the summaries' metadata relisted", func(context.Context) error {
		if _, m := reqs.counts(); m == meta0 {
			return errors.New("no metadata list yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // what a full list would take after it
	if full, _ := reqs.counts(); full != full0 {
		t.Errorf("the summaries were listed in full %d times after the restart, none changed", full-full0)
	}
	if zoneOf("node-nodes-0") != "a" || zoneOf("node-nodes-1") != "b" {
		t.Errorf("zones after the restart %q %q, want a b", zoneOf("node-nodes-0"), zoneOf("node-nodes-1"))
	}

	// One changed before the source could ask again: listed in full.
	reqs.setRefuse(true)
	restart()
	s, err := admin.SuperedgeV1().NodeLabelSummaries().Get(t.Context(), "nodes-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Nodes[0].Labels["zone"] = "c"
	if _, err := admin.SuperedgeV1().NodeLabelSummaries().Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	full0, _ = reqs.counts()
	reqs.setRefuse(false)
	testwait.Eventually(t.Context(), t, 2*time.Minute, "the changed summary followed", func(context.Context) error {
		if zoneOf("node-nodes-1") != "c" {
			return fmt.Errorf("node-nodes-1's zone %q, want c", zoneOf("node-nodes-1"))
		}
		return nil
	})
	if full, _ := reqs.counts(); full == full0 {
		t.Error("a summary changed while the source could not ask, and it was not listed in full")
	}
	if zoneOf("node-nodes-0") != "a" {
		t.Errorf("node-nodes-0's zone %q, want a", zoneOf("node-nodes-0"))
	}
}
