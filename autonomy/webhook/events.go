package webhook

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/servicegroup/servicegroup/autonomy"
)

// Reasons of the Events the webhook records.
const (
	// ReasonNodeunitCutOff (Warning, on a Node): every node of its nodeunit
	// is unreachable; the NoExecute taint is withheld until the autonomy ends.
	ReasonNodeunitCutOff = "NodeunitCutOff"
	// ReasonKeptReady (on a Pod): its node's nodeunit is cut off; the pod
	// stays Ready (and in its Services' endpoints).
	ReasonKeptReady = "AutonomyKeptReady"
	// ReasonDeciding (on a Node): unreachable while other nodes of its
	// nodeunit are reachable; its pods are kept for the decision window.
	ReasonDeciding = "AutonomyDeciding"
	// ReasonNodeFailure (on a Node): unreachable while other nodes of its
	// nodeunit are reachable past the window: Kubernetes' default handling.
	ReasonNodeFailure = "AutonomyNodeFailure"
	// ReasonExpired (Warning, on a Node): its nodeunit has been cut off for
	// longer than its autonomy: Kubernetes' default handling.
	ReasonExpired = "AutonomyExpired"
	// ReasonInvalidDuration (Warning, on a grid): its autonomy annotation
	// cannot be read; the grid gives no autonomy.
	ReasonInvalidDuration = "InvalidAutonomyDuration"
	// ReasonRegistrationRestored (Warning, on the
	// ValidatingWebhookConfiguration): someone else edited or deleted it;
	// the leader registered it again.
	ReasonRegistrationRestored = "AutonomyWebhookRestored"
)

// eventLog records each Event once per object and episode (the node
// lifecycle controller retries every few seconds).
type eventLog struct {
	recorder record.EventRecorder
	mu       sync.Mutex
	seen     map[string]time.Time
}

func newEventLog(r record.EventRecorder) *eventLog {
	return &eventLog{recorder: r, seen: map[string]time.Time{}}
}

// once records an Event on ref unless the same one (reason, episode) was
// recorded.
func (l *eventLog) once(ref *corev1.ObjectReference, episode time.Time, eventType, reason, message string, now time.Time) {
	key := fmt.Sprintf("%s/%s/%s/%s/%s/%d", ref.Kind, ref.Namespace, ref.Name, ref.UID, reason, episode.UnixNano())
	l.mu.Lock()
	_, done := l.seen[key]
	l.seen[key] = now
	l.mu.Unlock()
	if !done {
		l.recorder.Event(ref, eventType, reason, message)
	}
}

// prune forgets what was last asked about before cutoff.
func (l *eventLog) prune(cutoff time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, t := range l.seen {
		if t.Before(cutoff) {
			delete(l.seen, k)
		}
	}
}

func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name), APIVersion: "v1"}
}

// describe says, for a decision, what is withheld or let through and why.
func describe(node string, d autonomy.Decision) (eventType, reason, message string) {
	st := d.Status
	unit := st.Key + "=" + st.Value
	grid := fmt.Sprintf("%s %s/%s, %s %s", st.Grid.Kind, st.Grid.Namespace, st.Grid.Name, autonomy.DurationAnnotation, st.Grid.Duration)
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch st.State {
	case autonomy.CutOff:
		return corev1.EventTypeWarning, ReasonNodeunitCutOff, fmt.Sprintf(
			"nodeunit %s is cut off from the cloud (all %d nodes unreachable since %s): its pods stay Ready and unevicted until %s (%s)",
			unit, st.Nodes, at(st.Since), at(st.Until), grid)
	case autonomy.Deciding:
		return corev1.EventTypeNormal, ReasonDeciding, fmt.Sprintf(
			"%s is unreachable while %d of nodeunit %s's %d nodes are not: its pods stay Ready until %s, time for a nodeunit cut off from the cloud to show (%s)",
			node, st.Nodes-st.Unreachable, unit, st.Nodes, at(st.Until), grid)
	case autonomy.Expired:
		return corev1.EventTypeWarning, ReasonExpired, fmt.Sprintf(
			"nodeunit %s has been cut off from the cloud since %s, past its autonomy (until %s, %s): Kubernetes marks its pods not Ready and evicts them",
			unit, at(st.Since), at(st.Until), grid)
	default:
		return corev1.EventTypeNormal, ReasonNodeFailure, fmt.Sprintf(
			"%s is unreachable while %d of nodeunit %s's %d nodes are not: a failed node, not a nodeunit cut off; Kubernetes marks its pods not Ready and evicts them",
			node, st.Nodes-st.Unreachable, unit, st.Nodes)
	}
}
