package nodelabels

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestNodeLabelsAfterLongOutage: a source started while the apiserver is
// away keeps asking however long it stays away (its backoff reaches its cap
// many times over here) and follows the summaries once the apiserver is
// back. The wrapper and gridhosts run this Source as it is; their own tests
// (TestNodeLabelsFromSummaries, TestNodeModeLabelsFromSummaries) check that
// they wire it to the summaries.
func TestNodeLabelsAfterLongOutage(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	grids := versioned.NewForConfigOrDie(cp.Config)
	if _, err := grids.SuperedgeV1().NodeLabelSummaries().Create(t.Context(), &superedgev1.NodeLabelSummary{
		ObjectMeta: metav1.ObjectMeta{Name: "nodes-0"}, Keys: []string{"zone1"},
		Nodes: []superedgev1.NodeLabels{{Name: "node-1", Labels: map[string]string{"zone1": "a"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	meta := metadata.NewForConfigOrDie(cp.Config)
	sink := &recorder{labels: map[string]map[string]string{}}
	src := New(grids, meta, Nodes{
		NewInformer: func() cache.SharedIndexInformer {
			return metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
		},
		Labels: func(obj any) (string, map[string]string, bool) {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				return "", nil, false
			}
			return m.Name, m.Labels, true
		},
	}, sink)
	src.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 20 * time.Millisecond}
	cp.StopAPIServer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(2 * time.Second) // about 100 refused questions, the cap reached at the 5th
	select {
	case <-done:
		t.Fatal("the node label source gave up while the apiserver was away")
	default:
	}
	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t.Context(), t, 2*time.Minute, "summaries followed after the outage", func(context.Context) error {
		var zone string
		src.locked(func() { zone = sink.labels["node-1"]["zone1"] })
		if src.From() != FromSummaries || !src.HasSynced() || zone != "a" {
			return fmt.Errorf("source %q, synced %v, node-1's zone1 %q", src.From(), src.HasSynced(), zone)
		}
		return nil
	})
}
