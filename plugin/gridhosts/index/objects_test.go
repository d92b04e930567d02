package index

import (
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/internal/fixtures"
)

func strp(s string) *string { return &s }

// TestServiceKeys: a headless grid Service follows its topologyKeys
// annotation when valid, else its grid key.
func TestServiceKeys(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		anns    map[string]string
		want    []string
		wantErr bool
	}{
		{"grid key only", map[string]string{superedgev1.LabelGridUniqKey: "zone1"}, nil, []string{"zone1"}, false},
		{"topologyKeys wins", map[string]string{superedgev1.LabelGridUniqKey: "zone1"},
			map[string]string{superedgev1.AnnotationTopologyKeys: `["zone2","*"]`}, []string{"zone2", "*"}, false},
		{"invalid topologyKeys falls back", map[string]string{superedgev1.LabelGridUniqKey: "zone1"},
			map[string]string{superedgev1.AnnotationTopologyKeys: `["*","zone2"]`}, []string{"zone1"}, true},
		{"annotation key verbatim", map[string]string{superedgev1.LabelGridUniqKey: "a.io_zone"},
			map[string]string{superedgev1.AnnotationGridUniqKey: "a.io/zone"}, []string{"a.io/zone"}, false},
		{"not a grid service", nil, nil, nil, false},
	} {
		got, err := serviceKeys(gridname.GridKeyRefOf(tc.labels, tc.anns), tc.anns)
		if !slices.Equal(got, tc.want) || (err != nil) != tc.wantErr {
			t.Errorf("%s: got %q, %v; want %q, err=%v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestPodCacheKey: a pod's informer cache key is "ns/name" as for any pod,
// and it is the pod's own key string (no new string per key), from which
// its Name is cut.
func TestPodCacheKey(t *testing.T) {
	set := fixtures.Set(fixtures.Grid("default", "web", "zone1", "web-uid"), "east", "websvc", "web-set", 1)
	obj, err := Transform(fixtures.Pod(set, 0, "n1", "10.3.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*PodObj)
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(p)
	if err != nil || key != "default/web-east-0" || p.Namespace() != "default" || p.Name() != "web-east-0" {
		t.Fatalf("key %q (%v), namespace %q, name %q", key, err, p.Namespace(), p.Name())
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = cache.MetaNamespaceKeyFunc(p) }); n != 0 {
		t.Errorf("the key function allocates %v times per pod, want 0", n)
	}
	if unsafe.StringData(key[len("default/"):]) != unsafe.StringData(p.Name()) {
		t.Error("the cache key and the pod's name are two copies")
	}
	store := cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc)
	if err := store.Add(p); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := store.GetByKey("default/web-east-0"); !ok || got != p {
		t.Errorf("store.GetByKey: %v, %v", got, ok)
	}
	// Ten thousand of them are the plugin's largest part: one more word
	// moves every pod to the next size class (160 bytes).
	if size := unsafe.Sizeof(*p); size > 144 {
		t.Errorf("a pod's small form is %d bytes, want at most 144", size)
	}
}

// TestPodTimes: a pod's times keep their one-second grain in 32 bits, and
// times it cannot hold read as unknown, not as a wrong time.
func TestPodTimes(t *testing.T) {
	set := fixtures.Set(fixtures.Grid("default", "web", "zone1", "web-uid"), "east", "websvc", "web-set", 1)
	pod := fixtures.Pod(set, 0, "n1", "10.3.0.1")
	created := time.Date(2026, 11, 28, 23, 0, 1, 0, time.UTC)
	pod.CreationTimestamp = metav1.NewTime(created)
	obj, err := Transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*PodObj).Created(); !got.Equal(created) {
		t.Errorf("created %v, want %v", got, created)
	}
	for _, s := range []int64{0, -1, math.MaxUint32 + 1} {
		if got := unixTime(unixSeconds(s)); !got.IsZero() {
			t.Errorf("%d seconds read back as %v, want unknown", s, got)
		}
	}
}

// TestPodResourceVersion: a pod's resourceVersion kept as a number reads
// back as the apiserver wrote it; a form that is not a plain decimal is
// unknown, and an unknown version is never the same as another, so an
// update is not dropped for it.
func TestPodResourceVersion(t *testing.T) {
	for _, v := range []string{"1", "12345", "18446744073709551615"} {
		if got := formatRV(parseRV(v)); got != v {
			t.Errorf("%q reads back as %q", v, got)
		}
	}
	for _, v := range []string{"", "0", "012", "+5", "1e3", "abc", "18446744073709551616", " 7"} {
		if n := parseRV(v); n != 0 {
			t.Errorf("%q kept as %d, want unknown", v, n)
		}
	}
	a, b := &PodObj{rv: parseRV("x")}, &PodObj{rv: parseRV("y")}
	if a.sameRV(b) {
		t.Error("two unknown versions taken for the same")
	}
	if c, d := (&PodObj{rv: 7}), (&PodObj{rv: 7}); !c.sameRV(d) {
		t.Error("the same version not recognized")
	}
}
