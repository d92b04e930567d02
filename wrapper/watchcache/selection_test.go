package watchcache

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// The selector and the list of labels it excludes say the same; a request
// is within the selection only when it excludes every one of them; the
// paths are those of a list or watch across namespaces.
func TestKubeProxySelection(t *testing.T) {
	sel, err := labels.Parse(KubeProxySelector)
	if err != nil {
		t.Fatal(err)
	}
	if !WithinKubeProxySelection(sel) {
		t.Errorf("KubeProxySelector %q is not within kube-proxy's selection", KubeProxySelector)
	}
	if reqs, _ := sel.Requirements(); len(reqs) != len(KubeProxyExcluded) {
		t.Errorf("KubeProxySelector has %d requirements, KubeProxyExcluded %d labels", len(reqs), len(KubeProxyExcluded))
	}
	for _, s := range []string{"", "a=b", "!" + LabelServiceProxyName, "!" + KubeProxyExcluded[1], LabelServiceProxyName + "=x,!" + KubeProxyExcluded[1]} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if WithinKubeProxySelection(sel) {
			t.Errorf("%q taken as within kube-proxy's selection", s)
		}
	}
	if WithinKubeProxySelection(nil) {
		t.Error("no selector (a get) taken as within kube-proxy's selection")
	}
	for path, want := range map[string]bool{
		"/api/v1/services": true, "/apis/discovery.k8s.io/v1/endpointslices": true,
		"/api/v1/namespaces/ns/services": false, "/api/v1/endpoints": false, "/api/v1/nodes": false,
	} {
		if got := KubeProxySelectedPath(path); got != want {
			t.Errorf("KubeProxySelectedPath(%s) = %v, want %v", path, got, want)
		}
	}
}
