package gridname

import "testing"

// TestGridOfChildren: a node reads the grid from its own nodeunit's child
// first, then one whose key the Service names, then one not being deleted,
// then by name; another nodeunit's child only when none is its own.
func TestGridOfChildren(t *testing.T) {
	set := func(name, owner, uid, key string, terminating bool) *StatefulSet {
		return &StatefulSet{Name: name, Owner: ControllerRef{KindStatefulSetGrid, owner, ""}, HasOwner: true,
			GridKey: GridKeyRef{Label: key, HasLabel: true}, Terminating: terminating}
	}
	child := func(s *StatefulSet) Child {
		c, ok := ChildOf(s)
		if !ok {
			t.Fatalf("ChildOf(%s) names no grid", s.Name)
		}
		return c
	}
	a := child(set("web-a", "web", "", "zone", false))
	b := child(set("web-b", "web", "", "zone", false))
	a2 := child(set("web-a", "web", "", "zone2", false))
	bDel := child(set("web-b", "web", "", "zone", true))
	zoneSvc := &Service{GridKey: GridKeyRef{Label: "zone", HasLabel: true}}
	for _, tc := range []struct {
		name     string
		children []Child
		labels   map[string]string
		sv       *Service
		want     *Child
	}{
		{"own nodeunit's child", []Child{a, b}, map[string]string{"zone": "b"}, nil, &b},
		{"none its own: by name", []Child{b, a}, map[string]string{"zone": "c"}, nil, &a},
		{"key the Service names", []Child{a2, b}, map[string]string{"zone": "x", "zone2": "y"}, zoneSvc, &b},
		{"not being deleted", []Child{bDel, a}, map[string]string{"zone": "c"}, nil, &a},
		{"no children", nil, nil, nil, nil},
	} {
		got := GridOfChildren(tc.children, tc.labels, tc.sv)
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: %+v, want none", tc.name, got)
		case tc.want != nil && (got == nil || *got != tc.want.Grid):
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want.Grid)
		}
	}
	if _, ok := ChildOf(&StatefulSet{Name: "web-a", Owner: ControllerRef{Kind: KindStatefulSet, Name: "web"}, HasOwner: true}); ok {
		t.Error("a StatefulSet whose controller is no StatefulSetGrid named a grid")
	}
	if _, ok := ChildOf(&StatefulSet{Name: "other-a", Owner: ControllerRef{Kind: KindStatefulSetGrid, Name: "web"}, HasOwner: true}); ok {
		t.Error("a StatefulSet not named {grid}-{value} named a grid")
	}
}

func TestNodeSelectsPod(t *testing.T) {
	for _, tc := range []struct {
		ordinal                         uint64
		start, replicas, statusReplicas int32
		want                            bool
	}{
		{0, 0, 3, 0, true}, {2, 0, 3, 0, true}, {3, 0, 3, 0, false},
		{3, 0, 3, 4, true}, // still being scaled away
		{4, 2, 3, 0, true}, {5, 2, 3, 0, false},
		{0, 0, 0, 0, false},
	} {
		if got := NodeSelectsPod(tc.ordinal, tc.start, tc.replicas, tc.statusReplicas); got != tc.want {
			t.Errorf("NodeSelectsPod(%d, start %d, replicas %d, status %d) = %v", tc.ordinal, tc.start, tc.replicas, tc.statusReplicas, got)
		}
	}
}
