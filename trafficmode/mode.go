package trafficmode

import (
	"fmt"
	"strconv"
)

// Annotation on a ServiceGrid chooses its mode; absent means Wrapper. The
// controller copies a grid's annotations to its Service, so the Service
// carries it too.
const Annotation = "servicegroup.io/traffic-mode"

// Mode is how a ServiceGrid's Service keeps traffic in the nodeunit.
type Mode string

const (
	// Wrapper: the topologyKeys annotation, filtered by each node's wrapper.
	Wrapper Mode = "wrapper"
	// Native: spec.trafficDistribution PreferSameZone, honoured by the data
	// plane through the zone label.
	Native Mode = "native"
)

// Of reads a grid's mode from its annotations: Wrapper when the annotation
// is absent, an error naming the accepted values when it is not one of them.
func Of(annotations map[string]string) (Mode, error) {
	v, ok := annotations[Annotation]
	if !ok {
		return Wrapper, nil
	}
	return Parse(v)
}

// Parse reads one annotation value.
func Parse(v string) (Mode, error) {
	switch Mode(v) {
	case Wrapper, Native:
		return Mode(v), nil
	}
	return "", fmt.Errorf("%s %s is not a traffic mode: want %q (the default: the wrapper keeps traffic strictly in the nodeunit) or %q (trafficDistribution: PreferSameZone, any data plane)",
		Annotation, strconv.Quote(v), Wrapper, Native)
}
