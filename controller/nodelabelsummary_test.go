package controller

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

func summaryOf(name string, nodes ...string) *superedgev1.NodeLabelSummary {
	s := &superedgev1.NodeLabelSummary{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, superedgev1.NodeLabels{Name: n})
	}
	return s
}

func nodeNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func wantedOf(names ...[]string) map[string]map[string]string {
	w := map[string]map[string]string{}
	for _, ns := range names {
		for _, n := range ns {
			w[n] = nil
		}
	}
	return w
}

func TestAssignBuckets(t *testing.T) {
	full := nodeNames("a", superedgev1.MaxNodesPerLabelSummary)
	cases := []struct {
		name    string
		current map[string]*superedgev1.NodeLabelSummary
		wanted  map[string]map[string]string
		want    map[string][]string
	}{
		{
			name:   "first run fills buckets of 100 in name order",
			wanted: wantedOf(nodeNames("n", 250)),
			want: map[string][]string{
				"nodes-0": nodeNames("n", 250)[:100], "nodes-1": nodeNames("n", 250)[100:200], "nodes-2": nodeNames("n", 250)[200:],
			},
		},
		{
			name:    "a new node goes where there is room, nodes stay put",
			current: map[string]*superedgev1.NodeLabelSummary{"nodes-0": summaryOf("nodes-0", full...), "nodes-1": summaryOf("nodes-1", "z1")},
			wanted:  wantedOf(full, []string{"z1", "b"}),
			want:    map[string][]string{"nodes-0": full, "nodes-1": {"b", "z1"}},
		},
		{
			name:    "a deleted node leaves its bucket, which is kept when empty",
			current: map[string]*superedgev1.NodeLabelSummary{"nodes-0": summaryOf("nodes-0", full...), "nodes-1": summaryOf("nodes-1", "z1")},
			wanted:  wantedOf(full),
			want:    map[string][]string{"nodes-0": full, "nodes-1": {}},
		},
		{
			name:    "a node listed twice stays in the first bucket by name",
			current: map[string]*superedgev1.NodeLabelSummary{"nodes-0": summaryOf("nodes-0", "x"), "nodes-1": summaryOf("nodes-1", "x", "y")},
			wanted:  wantedOf([]string{"x", "y"}),
			want:    map[string][]string{"nodes-0": {"x"}, "nodes-1": {"y"}},
		},
		{
			name:    "a freed place is refilled before a new bucket opens",
			current: map[string]*superedgev1.NodeLabelSummary{"nodes-0": summaryOf("nodes-0", full[:99]...)},
			wanted:  wantedOf(full[:99], []string{"new1", "new2"}),
			want:    map[string][]string{"nodes-0": append(slices.Clone(full[:99]), "new1"), "nodes-1": {"new2"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.current == nil {
				c.current = map[string]*superedgev1.NodeLabelSummary{}
			}
			got := assignBuckets(c.current, c.wanted)
			if len(got) != len(c.want) {
				t.Fatalf("buckets %v, want %v", got, c.want)
			}
			for name, want := range c.want {
				w := slices.Clone(want)
				slices.Sort(w)
				if !slices.Equal(got[name], w) {
					t.Errorf("%s = %v, want %v", name, got[name], w)
				}
			}
		})
	}
}
