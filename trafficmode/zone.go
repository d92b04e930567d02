package trafficmode

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ZoneLabel is the node label trafficDistribution groups endpoints by.
const ZoneLabel = corev1.LabelTopologyZone

// ZoneWrittenAnnotation on a Node records the zone label value the
// controller wrote there (the label's server-side apply owner is the
// controller's zone field manager as well); a label without it, or with
// another value, is someone else's.
const ZoneWrittenAnnotation = "servicegroup.io/zone-written"

// ZoneSource is the grid key whose values are the zones: the controller's
// --zone-from-grid-key, or the zone label itself when that is empty (a grid
// keyed on topology.kubernetes.io/zone needs no writer).
func ZoneSource(zoneFromGridKey string) string {
	if zoneFromGridKey == "" {
		return ZoneLabel
	}
	return zoneFromGridKey
}

// ValidZoneFromGridKey checks the controller's --zone-from-grid-key ("" is off).
func ValidZoneFromGridKey(key string) error {
	if key == "" {
		return nil
	}
	if key == ZoneLabel {
		return fmt.Errorf("%s is the zone label itself: leave the flag empty, grids keyed on it need no zone writer", ZoneLabel)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("not a label key: %s", strings.Join(errs, "; "))
	}
	return nil
}

// NativeKeyError says why a native-mode grid on gridKey cannot be honoured
// when the controller writes zones from zoneFromGridKey, or nil.
func NativeKeyError(gridKey, zoneFromGridKey string) error {
	source := ZoneSource(zoneFromGridKey)
	if gridKey == source {
		return nil
	}
	if zoneFromGridKey == "" {
		return fmt.Errorf("%s: native mode keeps traffic in the zone (%s), and this grid's key is %q; the controller writes no zone labels (--zone-from-grid-key is empty): start it with --zone-from-grid-key=%s if that key is the cluster's one grouping, or use the wrapper mode (remove the annotation); the Service is left as it is",
			Annotation, ZoneLabel, gridKey, gridKey)
	}
	return fmt.Errorf("%s: native mode keeps traffic in the zone (%s), which the controller sets from grid key %q, and this grid's key is %q: key the grid on %q or use the wrapper mode (remove the annotation); the Service is left as it is",
		Annotation, ZoneLabel, source, gridKey, source)
}

// ZoneAction is what the zone-label writer does to one node.
type ZoneAction int

const (
	// ZoneKeep: nothing to write.
	ZoneKeep ZoneAction = iota
	// ZoneWrite: set the zone label (and ZoneWrittenAnnotation) to the value.
	ZoneWrite
	// ZoneRelease: give up what the writer wrote: the label where it is
	// still the writer's alone, and the annotation.
	ZoneRelease
	// ZoneConflict: the zone label is someone else's and differs from the
	// nodeunit: left as it is (a Warning Event); a stale annotation of the
	// writer's is released.
	ZoneConflict
)

func (a ZoneAction) String() string {
	switch a {
	case ZoneKeep:
		return "keep"
	case ZoneWrite:
		return "write"
	case ZoneRelease:
		return "release"
	case ZoneConflict:
		return "conflict"
	}
	return fmt.Sprintf("ZoneAction(%d)", int(a))
}

// DecideZone is what the writer does to a node with these labels and
// annotations when zones come from zoneFromGridKey ("" is off), and the
// value it wants. The label is the writer's when the annotation records
// exactly its current value; a label of anyone else is never changed.
func DecideZone(labels, annotations map[string]string, zoneFromGridKey string) (ZoneAction, string) {
	written, recorded := annotations[ZoneWrittenAnnotation]
	cur, has := labels[ZoneLabel]
	ours := recorded && has && written == cur
	want := ""
	if zoneFromGridKey != "" && zoneFromGridKey != ZoneLabel {
		want = labels[zoneFromGridKey]
	}
	switch {
	case want == "":
		if recorded {
			return ZoneRelease, ""
		}
		return ZoneKeep, ""
	case !has, ours && cur != want:
		return ZoneWrite, want
	case ours:
		return ZoneKeep, want
	case cur == want:
		// Someone else's label agrees; a stale record of ours goes.
		if recorded {
			return ZoneRelease, want
		}
		return ZoneKeep, want
	}
	return ZoneConflict, want
}
