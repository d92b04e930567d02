package wrapper

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/nodelabels"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestNodeLabelsAfterLongOutage: node labels started while upstream is away
// keep asking however long it stays away (the backoff reaches its cap many
// times over here) and follow the summaries once upstream is back.
func TestNodeLabelsAfterLongOutage(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	if err := crds.Install(t.Context(), apiextensionsclient.NewForConfigOrDie(cp.Config), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	grids := versioned.NewForConfigOrDie(cp.Config)
	if _, err := grids.SuperedgeV1().NodeLabelSummaries().Create(t.Context(), &superedgev1.NodeLabelSummary{
		ObjectMeta: metav1.ObjectMeta{Name: "nodes-0"}, Keys: []string{"zone1"},
		Nodes: []superedgev1.NodeLabels{{Name: "node-1", Labels: map[string]string{"zone1": "a"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n := newNodeLabels(metadata.NewForConfigOrDie(cp.Config), grids, cache.ResourceEventHandlerFuncs{})
	n.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 20 * time.Millisecond}
	cp.StopAPIServer()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(2 * time.Second) // about 100 refused questions, the cap reached at the 5th
	select {
	case <-done:
		t.Fatal("node labels gave up while upstream was away")
	default:
	}
	if err := cp.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return n.From() == nodelabels.FromSummaries && n.HasSynced(), nil
	}); err != nil {
		t.Fatal(fmt.Errorf("summaries not followed after the outage: source %q, synced %v: %w", n.From(), n.HasSynced(), err))
	}
}
