package sitestream

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// NodeNameExtra is the user extra kube-apiserver puts into the TokenReview
// of a token bound to a Pod: the Pod's node (ServiceAccountTokenPodNodeInfo,
// GA in 1.32). A peer's node, and so its site, is taken from it, never
// from what the peer says about itself.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// siteNodes knows the Nodes that carry this site's label value, from a
// metadata-only Node informer selecting only them (names and labels kept):
// whose token and whose Lease a wrapper of the site trusts. Metadata only,
// because kubelets rewrite their Node's status (its images: 10 KB and
// more) every few minutes and every wrapper of a site watches every Node
// of it: whole Nodes would cost the site's cloud links N x N status
// reports.
type siteNodes struct {
	informer cache.SharedIndexInformer
	started  atomic.Bool
}

func newSiteNodes(meta metadata.Interface, label, site string) *siteNodes {
	selector := labels.SelectorFromSet(labels.Set{label: site}).String()
	inf := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
	_ = inf.SetTransform(slimNode) // cannot fail: the informer has not started
	return &siteNodes{informer: inf}
}

// slimNode keeps what the site check reads: the name and the labels.
func slimNode(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, ResourceVersion: m.ResourceVersion}}, nil
}

// run starts the informer and waits for its first list; false if ctx ended
// first.
func (s *siteNodes) run(ctx context.Context) bool {
	s.started.Store(true)
	go s.informer.RunWithContext(ctx)
	return cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced)
}

// has reports whether node is one of the site's; synced is false until the
// first list is in (nothing is known to be in the site then).
func (s *siteNodes) has(node string) (in, synced bool) {
	if s == nil || !s.started.Load() || !s.informer.HasSynced() {
		return false, false
	}
	_, in, _ = s.informer.GetIndexer().GetByKey(node)
	return in, true
}
