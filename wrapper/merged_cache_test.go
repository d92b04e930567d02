package wrapper

import (
	"fmt"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The merged cache hands a key over between sources, falls back to another
// source's object when one lets go, keeps its index by Service in step with
// the object each key shows, and withdraws what only a stopped source held.
func TestMergedCacheSourcesAndIndex(t *testing.T) {
	var heard []string
	m := newMergedCache(sliceIndexers, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { heard = append(heard, "add "+sliceDesc(obj)) },
		UpdateFunc: func(old, obj any) { heard = append(heard, "update "+sliceDesc(old)+" -> "+sliceDesc(obj)) },
		DeleteFunc: func(obj any) { heard = append(heard, "delete "+sliceDesc(obj)) },
	})
	slice := func(name, service, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
	}
	main, onDemand := m.sourceHandler(sourceMain), m.sourceHandler(sourceOnDemand)
	byService := func(svc string) []string {
		objs, err := m.ByIndex(indexByService, "ns/"+svc)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			out = append(out, sliceDesc(o))
		}
		slices.Sort(out)
		return out
	}
	expect := func(step string, want []string, svcA, svcB []string) {
		t.Helper()
		if !slices.Equal(heard, want) {
			t.Fatalf("%s: heard %q, want %q", step, heard, want)
		}
		heard = nil
		if got := byService("a"); !slices.Equal(got, svcA) {
			t.Fatalf("%s: index a = %q, want %q", step, got, svcA)
		}
		if got := byService("b"); !slices.Equal(got, svcB) {
			t.Fatalf("%s: index b = %q, want %q", step, got, svcB)
		}
	}

	main.OnAdd(slice("s1", "a", "1"), false)
	main.OnAdd(slice("s2", "a", "1"), false)
	expect("added", []string{"add s1@1(a)", "add s2@1(a)"}, []string{"s1@1(a)", "s2@1(a)"}, nil)

	// The on-demand source sees s1 relabelled to Service b: the merged
	// view shows the newest, indexed under b.
	onDemand.OnAdd(slice("s1", "b", "2"), false)
	expect("relabelled", []string{"update s1@1(a) -> s1@2(b)"}, []string{"s2@1(a)"}, []string{"s1@2(b)"})

	// The on-demand source lets go: the main source's object is shown again.
	onDemand.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/s1", Obj: slice("s1", "b", "2")})
	expect("let go", []string{"update s1@2(b) -> s1@1(a)"}, []string{"s1@1(a)", "s2@1(a)"}, nil)

	// A key only the on-demand source holds goes when it is withdrawn; one
	// both hold stays as the main source has it.
	onDemand.OnAdd(slice("s3", "b", "3"), false)
	onDemand.OnUpdate(nil, slice("s2", "a", "3"))
	heard = nil
	m.withdraw(sourceOnDemand)
	slices.Sort(heard)
	expect("withdrawn", []string{"delete s3@3(b)", "update s2@3(a) -> s2@1(a)"}, []string{"s1@1(a)", "s2@1(a)"}, nil)

	main.OnDelete(slice("s1", "a", "1"))
	expect("deleted", []string{"delete s1@1(a)"}, []string{"s2@1(a)"}, nil)
	if keys := m.ListKeys(); !slices.Equal(keys, []string{"ns/s2"}) {
		t.Fatalf("keys %q, want [ns/s2]", keys)
	}
	if o, ok, _ := m.GetByKey("ns/s2"); !ok || sliceDesc(o) != "s2@1(a)" {
		t.Fatalf("ns/s2: %v %v", o, ok)
	}
	if values := m.ListIndexFuncValues(indexByService); !slices.Equal(values, []string{"ns/a"}) {
		t.Fatalf("index values %q, want [ns/a]", values)
	}
	if err := m.Add(slice("s4", "a", "4")); err == nil {
		t.Fatal("Add from outside the sources succeeded")
	}
}

func sliceDesc(obj any) string {
	s := obj.(*discoveryv1.EndpointSlice)
	return fmt.Sprintf("%s@%s(%s)", s.Name, s.ResourceVersion, s.Labels[discoveryv1.LabelServiceName])
}
