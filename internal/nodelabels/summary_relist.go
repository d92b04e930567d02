package nodelabels

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// summaryListWatch lists and watches the NodeLabelSummaries for the
// informer that follows them. After an apiserver restart or an etcd
// compaction its watch ends in 410 and the informer relists, though the
// summaries rarely changed meanwhile (only a node coming, going or
// relabelled rewrites one). So a relist first lists the summaries' metadata
// (protobuf, a few hundred bytes a summary, where the summaries themselves
// are JSON, ~50 bytes a node): when every summary is one the informer
// holds, by name and resourceVersion, the answer is the informer's own
// objects at that list's resourceVersion, exactly what a full list at it
// would hold, and no summary crosses the link again. Otherwise, and for the
// first list, it lists them in full.
type summaryListWatch struct {
	grids versioned.Interface
	meta  metadata.Interface
	// held is the informer's store, set before it runs.
	held   cache.Store
	inFull bool // Source.FullRelists
	listed bool // only the reflector's goroutine lists
}

func (s *summaryListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

func (s *summaryListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

func (s *summaryListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if s.listed && !s.inFull && opts.Continue == "" {
		if l, ok, err := s.fromHeld(ctx, opts); ok || err != nil {
			return l, err
		}
	}
	l, err := s.grids.SuperedgeV1().NodeLabelSummaries().List(ctx, opts)
	if err == nil && l.Continue == "" {
		s.listed = true
	}
	return l, err
}

// fromHeld answers a relist from the informer's objects if the summaries'
// metadata says they are all current; ok is false when they are not.
func (s *summaryListWatch) fromHeld(ctx context.Context, opts metav1.ListOptions) (*superedgev1.NodeLabelSummaryList, bool, error) {
	mopts := opts
	mopts.Limit = 0 // one answer: summaries are few (each holds up to MaxNodesPerLabelSummary nodes)
	m, err := s.meta.Resource(nodeLabelSummaries).List(ctx, mopts)
	if err != nil {
		return nil, false, err
	}
	if len(m.Items) != len(s.held.ListKeys()) {
		return nil, false, nil
	}
	out := &superedgev1.NodeLabelSummaryList{ListMeta: metav1.ListMeta{ResourceVersion: m.ResourceVersion}}
	for i := range m.Items {
		obj, ok, _ := s.held.GetByKey(m.Items[i].Name)
		sum, isSummary := obj.(*superedgev1.NodeLabelSummary)
		if !ok || !isSummary || sum.ResourceVersion != m.Items[i].ResourceVersion || sum.UID != m.Items[i].UID {
			return nil, false, nil
		}
		out.Items = append(out.Items, *sum.DeepCopy())
	}
	return out, true, nil
}

func (s *summaryListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return s.grids.SuperedgeV1().NodeLabelSummaries().Watch(ctx, opts)
}

// IsWatchListSemanticsUnSupported: the reflector relists with List, which
// answers from the informer's objects; a watch-list would pass it by.
func (s *summaryListWatch) IsWatchListSemanticsUnSupported() bool { return true }
