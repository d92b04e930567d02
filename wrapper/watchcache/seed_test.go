package watchcache

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func testService(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"a": "b"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Port: 80}}}}
}

// TestSeededStoreResume: a watch resumes from the snapshot's versions only;
// any other version of the previous process is too old; re-setting a seeded
// object unchanged emits nothing; unconfirmed seeded objects are DELETED.
func TestSeededStoreResume(t *testing.T) {
	clock := NewClock(10_000, nil)
	st := NewStore(ResourceServices, clock, func() Object { return &corev1.Service{} }, nil, LogLimits{Bytes: 4 << 20, MaxLagBytes: 64 << 20})
	a, b := testService("a"), testService("b")
	a.ResourceVersion, b.ResourceVersion = "90", "95"
	if err := st.Seed(map[string]Object{"ns/a": a, "ns/b": b}, 95, 100); err != nil {
		t.Fatal(err)
	}
	if err := st.Seed(nil, 1, 2); err == nil {
		t.Fatal("seeding twice succeeded")
	}
	if st.Set("ns/a", testService("a")) {
		t.Fatal("unchanged seeded object emitted an event")
	}
	changed := testService("a")
	changed.Labels["a"] = "c"
	if !st.Set("ns/a", changed) {
		t.Fatal("changed object emitted no event")
	}
	if n := st.DropSeeded(); n != 1 {
		t.Fatalf("dropped %d, want 1 (ns/b)", n)
	}
	want := []watch.EventType{watch.Modified, watch.Deleted}
	for _, rv := range []uint64{95, 98, 100} {
		initial, w, err := st.Watch(WatchOptions{Mode: FromVersion, RV: rv})
		if err != nil {
			t.Fatalf("resume from %d: %v", rv, err)
		}
		st.StopWatch(w)
		var got []watch.EventType
		for _, ev := range initial {
			got = append(got, ev.Type)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("resume from %d: %v, want %v", rv, got, want)
		}
	}
	for _, rv := range []uint64{1, 94, 101, 9_999} {
		_, _, err := st.Watch(WatchOptions{Mode: FromVersion, RV: rv})
		var rvErr *VersionError
		if !errors.As(err, &rvErr) || !rvErr.TooOld {
			t.Fatalf("resume from %d (outside the snapshot's [95, 100]): %v, want too old", rv, err)
		}
	}
}
