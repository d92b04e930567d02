package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
)

// TestEventHandlerUnwrapsTombstones: a pod deleted while the informer was
// away (its delete comes as a tombstone) leaves the index.
func TestEventHandlerUnwrapsTombstones(t *testing.T) {
	x := index.New(index.Options{})
	h := eventHandler(x)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", ResourceVersion: "3"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	fixtures.SetPodIPs(p, "10.9.9.9")
	obj, err := index.Transform(p)
	if err != nil {
		t.Fatal(err)
	}
	h.OnAdd(obj, true)
	if _, ok := x.Pod("default/web-0"); !ok {
		t.Fatal("the added pod is not in the index")
	}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/web-0", Obj: obj})
	if _, ok := x.Pod("default/web-0"); ok {
		t.Fatal("the pod is still in the index after its tombstone")
	}
}
