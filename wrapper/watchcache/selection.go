package watchcache

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// kube-proxy's selection, stated once: kube-proxy lists and watches
// Services and EndpointSlices with a label selector that leaves out what it
// does not implement. The wrapper's upstream informers read exactly this,
// the site stream shares exactly this, and what it leaves out is fetched
// only while a client asks for it.

// LabelServiceProxyName marks Services (and their EndpointSlices) that
// another proxy than kube-proxy implements.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// KubeProxyExcluded are the labels kube-proxy's selector requires absent:
// each marks what some other part implements (another proxy; headless
// Services, which DNS answers).
var KubeProxyExcluded = [...]string{LabelServiceProxyName, corev1.IsHeadlessService}

// KubeProxySelector is the label selector kube-proxy lists and watches
// KubeProxySelected with.
const KubeProxySelector = "!" + LabelServiceProxyName + ",!" + corev1.IsHeadlessService

// KubeProxySelected are the resources kube-proxy reads with its selector.
var KubeProxySelected = []*Resource{Services, EndpointSlices}

// WithinKubeProxySelection reports whether a request selecting by sel sees
// only objects kube-proxy's selector admits: sel requires every
// KubeProxyExcluded label to be absent.
func WithinKubeProxySelection(sel labels.Selector) bool {
	if sel == nil {
		return false
	}
	reqs, _ := sel.Requirements()
	absent := map[string]bool{}
	for _, r := range reqs {
		if r.Operator() == selection.DoesNotExist {
			absent[r.Key()] = true
		}
	}
	for _, l := range KubeProxyExcluded {
		if !absent[l] {
			return false
		}
	}
	return true
}

// KubeProxySelectedPath reports whether path is a list or watch of a
// KubeProxySelected resource across namespaces.
func KubeProxySelectedPath(path string) bool {
	for _, p := range kubeProxySelectedPaths {
		if path == p {
			return true
		}
	}
	return false
}

var kubeProxySelectedPaths = func() []string {
	out := make([]string, len(KubeProxySelected))
	for i, r := range KubeProxySelected {
		out[i] = r.CollectionPath()
	}
	return out
}()
