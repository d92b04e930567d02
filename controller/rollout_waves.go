package controller

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// assignWaves puts the canary nodeunits in wave 0 and the others, in name
// order, in waves of spec.rollout.waveSize; order lists every nodeunit by
// wave, then name.
func assignWaves(s *superedgev1.RolloutStrategy, key string, units []unitView) (map[string]int32, []string) {
	var canary, rest []string
	sel := canarySelector(s)
	for _, u := range units {
		if isCanary(s, sel, key, u.value) {
			canary = append(canary, u.value)
		} else {
			rest = append(rest, u.value)
		}
	}
	slices.Sort(canary)
	slices.Sort(rest)
	size := waveSize(s, len(rest))
	waves := make(map[string]int32, len(units))
	order := make([]string, 0, len(units))
	first := int32(0)
	if len(canary) > 0 {
		for _, v := range canary {
			waves[v] = 0
		}
		order = append(order, canary...)
		first = 1
	}
	for i, v := range rest {
		waves[v] = first + int32(i/size)
	}
	order = append(order, rest...)
	return waves, order
}

// canarySelector is spec.rollout.canary.selector, or nil. The CRD schema
// gives it a LabelSelector's shape; one that still fails to parse selects
// nothing.
func canarySelector(s *superedgev1.RolloutStrategy) labels.Selector {
	if s.Canary == nil || s.Canary.Selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Canary.Selector)
	if err != nil {
		return nil
	}
	return sel
}

// isCanary: nodeunit value is named in spec.rollout.canary.nodeUnits, or
// its labels {key: value} match the canary selector.
func isCanary(s *superedgev1.RolloutStrategy, sel labels.Selector, key, value string) bool {
	named := s.Canary != nil && slices.Contains(s.Canary.NodeUnits, value)
	return named || (sel != nil && !sel.Empty() && sel.Matches(labels.Set{key: value}))
}

// waveSize is how many of the n non-canary nodeunits a wave takes:
// spec.rollout.waveSize (a count, or a percentage of n rounded up), all of
// them if unset, at least 1.
func waveSize(s *superedgev1.RolloutStrategy, n int) int {
	size := n
	if s.WaveSize != nil && n > 0 {
		if v, err := intstr.GetScaledValueFromIntOrPercent(s.WaveSize, n, true); err == nil && v > 0 {
			size = v
		}
	}
	return max(size, 1)
}
