package gridname

import (
	"net/netip"
	"testing"
)

// finder is a fixed set of small objects: Resolve's view in these tests.
type finder struct {
	grid *Grid
	sets map[string]*StatefulSet // by nodeunit value
	svc  *Service
	pod  *Pod
}

func (f finder) Grid() *Grid                       { return f.grid }
func (f finder) StatefulSet(v string) *StatefulSet { return f.sets[v] }
func (f finder) Service() *Service                 { return f.svc }
func (f finder) Pod(*StatefulSet) *Pod             { return f.pod }

// healthy is a grid whose name web-0.svc resolves on a node of zone=a.
func healthy() (finder, map[string]string) {
	g := &Grid{Name: "web", UID: "g-uid", Key: "zone", KeyLabel: "zone"}
	key := GridKeyRef{Label: "zone", HasLabel: true}
	s := &StatefulSet{Name: "web-a", UID: "s-uid", Owner: ControllerRef{KindStatefulSetGrid, "web", "g-uid"}, HasOwner: true,
		GridSelector: "web", HasGridSelector: true, GridKey: key, ServiceName: "svc", NodeSelector: map[string]string{"zone": "a"}}
	p := &Pod{Owner: ControllerRef{KindStatefulSet, "web-a", "s-uid"}, HasOwner: true, IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	return finder{grid: g, sets: map[string]*StatefulSet{"a": s}, svc: &Service{GridKey: key}, pod: p}, map[string]string{"zone": "a"}
}

// TestResolve breaks one fact of a healthy grid at a time: each must be
// ruled out with its own reason, at its own step.
func TestResolve(t *testing.T) {
	q := Query{Grid: "web", Ordinal: "0", Service: "svc"}
	for _, tc := range []struct {
		want   Reason
		step   string
		break_ func(f *finder, node map[string]string) (known bool)
	}{
		{Resolved, "", func(*finder, map[string]string) bool { return true }},
		{GridNotFound, StepGrid, func(f *finder, _ map[string]string) bool { f.grid = nil; return true }},
		{GridNoKey, StepGrid, func(f *finder, _ map[string]string) bool { f.grid.Key = ""; return true }},
		{NodeNotFound, StepNodeValue, func(*finder, map[string]string) bool { return false }},
		{NodeNoValue, StepNodeValue, func(_ *finder, n map[string]string) bool { n["zone"] = ""; return true }},
		{SetNotFound, StepStatefulSet, func(_ *finder, n map[string]string) bool { n["zone"] = "b"; return true }},
		{SetTerminating, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].Terminating = true; return true }},
		{SetNotControlled, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].HasOwner = false; return true }},
		{SetNotControlled, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].Owner.UID = "other"; return true }},
		{SetNotControlled, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].Owner.Kind = "DeploymentGrid"; return true }},
		{SetGridSelector, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].GridSelector = "x"; return true }},
		{SetGridKey, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].GridKey.Label = "zone9"; return true }},
		{SetServiceName, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].ServiceName = "x"; return true }},
		{SetNodeSelector, StepStatefulSet, func(f *finder, _ map[string]string) bool { f.sets["a"].NodeSelector = nil; return true }},
		{ServiceNotFound, StepService, func(f *finder, _ map[string]string) bool { f.svc = nil; return true }},
		{ServiceGridKey, StepService, func(f *finder, _ map[string]string) bool { f.svc.GridKey.HasLabel = false; return true }},
		{PodNotFound, StepPod, func(f *finder, _ map[string]string) bool { f.pod = nil; return true }},
		{PodNotControlled, StepPod, func(f *finder, _ map[string]string) bool { f.pod.Owner.UID = "other"; return true }},
		{PodTerminating, StepPod, func(f *finder, _ map[string]string) bool { f.pod.Terminating = true; return true }},
		{PodFinished, StepPod, func(f *finder, _ map[string]string) bool { f.pod.Finished = true; return true }},
		{PodNoAddress, StepAddresses, func(f *finder, _ map[string]string) bool { f.pod.IPs = nil; return true }},
	} {
		f, node := healthy()
		known := tc.break_(&f, node)
		r := Resolve(&q, node, known, f)
		if r.Reason != tc.want || r.Reason.Step() != tc.step {
			t.Errorf("want %q at %q, got %q at %q", tc.want, tc.step, r.Reason, r.Reason.Step())
		}
		if (r.Reason == Resolved) != (r.Pod != nil && len(r.Pod.IPs) > 0) {
			t.Errorf("%q: pod %+v", r.Reason, r.Pod)
		}
	}
}

func TestSplitHost(t *testing.T) {
	for _, tc := range []struct {
		host, grid, ord string
		ok              bool
	}{
		{"web-0", "web", "0", true},
		{"a-b-12", "a-b", "12", true},
		{"web-4294967295", "web", "4294967295", true},
		{"web-4294967296", "", "", false},
		{"web-01", "", "", false},
		{"web", "", "", false},
		{"-1", "", "", false},
		{"web-", "", "", false},
		{"web-+1", "", "", false},
	} {
		g, o, ok := SplitHost(tc.host)
		if g != tc.grid || o != tc.ord || ok != tc.ok {
			t.Errorf("SplitHost(%q) = %q %q %v, want %q %q %v", tc.host, g, o, ok, tc.grid, tc.ord, tc.ok)
		}
	}
}

// TestIsOrdinal: the bounds around 2^32 and every malformed form.
func TestIsOrdinal(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "7": true, "10": true, "4294967295": true, "999999999": true,
		"4294967296": false, "9999999999": false, "42949672950": false,
		"": false, "00": false, "01": false, "-1": false, "+1": false, "1a": false, " 1": false, "1.0": false,
	} {
		if got := IsOrdinal(s); got != want {
			t.Errorf("IsOrdinal(%q) = %v, want %v", s, got, want)
		}
	}
}
