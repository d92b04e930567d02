package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// TestDesiredHashesHoldOnlyForWhatTheChildIsBuiltFrom: a remembered hash
// answers for the same grid UID, generation, labels and annotations and the
// same unit, and for nothing else that enters the desired child; a status
// write (a new resourceVersion alone) keeps it.
func TestDesiredHashesHoldOnlyForWhatTheChildIsBuiltFrom(t *testing.T) {
	base := &superedgev1.DeploymentGrid{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1", Generation: 3,
		ResourceVersion: "10", Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"note": "x"}}}
	u := unit{value: "zone1", name: "g-zone1", template: "default"}
	var d desiredHashes
	if _, ok := d.get(base, u); ok {
		t.Fatal("hash before any was remembered")
	}
	d.put(base, u, "h1")
	if h, ok := d.get(base, u); !ok || h != "h1" {
		t.Fatalf("get = %q, %v; want h1", h, ok)
	}
	statusWritten := base.DeepCopy()
	statusWritten.ResourceVersion = "11"
	if h, ok := d.get(statusWritten, u); !ok || h != "h1" {
		t.Errorf("a new resourceVersion alone dropped the hash: %q, %v", h, ok)
	}
	grids := map[string]func(g *superedgev1.DeploymentGrid){
		"spec changed (generation)": func(g *superedgev1.DeploymentGrid) { g.Generation = 4 },
		"grid recreated (UID)":      func(g *superedgev1.DeploymentGrid) { g.UID = "u2" },
		"label changed":             func(g *superedgev1.DeploymentGrid) { g.Labels = map[string]string{"app": "b"} },
		"label added":               func(g *superedgev1.DeploymentGrid) { g.Labels = map[string]string{"app": "a", "tier": "t"} },
		"annotation changed":        func(g *superedgev1.DeploymentGrid) { g.Annotations = nil },
	}
	for what, change := range grids {
		g := base.DeepCopy()
		change(g)
		if h, ok := d.get(g, u); ok {
			t.Errorf("%s: hash %q still answered", what, h)
		}
	}
	units := map[string]unit{
		"other nodeunit":   {value: "zone2", name: "g-zone2", template: "default"},
		"other template":   {value: "zone1", name: "g-zone1", template: "canary"},
		"rollout override": {value: "zone1", name: "g-zone1", template: "default", override: []byte(`{"a":1}`)},
	}
	for what, other := range units {
		if h, ok := d.get(base, other); ok {
			t.Errorf("%s: hash %q of another unit answered", what, h)
		}
	}
	newer := base.DeepCopy()
	newer.Generation = 4
	d.put(newer, u, "h2")
	if _, ok := d.get(base, u); ok {
		t.Error("the older generation's hash survived a newer one")
	}
	d.forget(cache.ObjectName{Namespace: "ns", Name: "g"})
	if _, ok := d.get(newer, u); ok {
		t.Error("hash kept for a deleted grid")
	}
	unversioned := base.DeepCopy()
	unversioned.Generation = 0
	d.put(unversioned, u, "h3")
	if _, ok := d.get(unversioned, u); ok {
		t.Error("hash remembered for a grid without a generation")
	}
}
