package sitestream

import (
	"context"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// NodeNameExtra is the user extra kube-apiserver puts into the TokenReview
// of a token bound to a Pod: the Pod's node (ServiceAccountTokenPodNodeInfo,
// GA in 1.32). A peer's node, and so its site, is taken from it, never
// from what the peer says about itself.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// siteNodes knows the Nodes that carry this site's label value, from a
// Node informer selecting only them (names and labels kept): whose token
// and whose Lease a wrapper of the site trusts.
type siteNodes struct {
	informer cache.SharedIndexInformer
	started  atomic.Bool
}

func newSiteNodes(client kubernetes.Interface, label, site string) *siteNodes {
	selector := labels.SelectorFromSet(labels.Set{label: site}).String()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(slimNode))
	return &siteNodes{informer: f.Core().V1().Nodes().Informer()}
}

// slimNode keeps what the site check reads: the name and the labels.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, ResourceVersion: n.ResourceVersion}}, nil
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
