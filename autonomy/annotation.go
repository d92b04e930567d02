package autonomy

import (
	"fmt"
	"time"
)

// DurationAnnotation on a DeploymentGrid or StatefulSetGrid opts the nodes of
// its nodeunits into autonomy: how long a nodeunit cut off from the cloud
// keeps its pods Ready and unevicted. The value is a Go duration ("2h",
// "90m"), as OpenYurt's node.openyurt.io/autonomy-duration is.
const DurationAnnotation = "servicegroup.io/autonomy-duration"

// Bounds of an autonomy duration: shorter than MinDuration is no autonomy
// worth the name (the node lifecycle controller's own grace period is 50 s);
// longer than MaxDuration keeps pods of nodes that may never come back in
// every Service for weeks.
const (
	MinDuration = time.Minute
	MaxDuration = 30 * 24 * time.Hour
)

// ParseDuration reads an autonomy-duration annotation value; the error says
// what is wrong with it and what is accepted.
func ParseDuration(v string) (time.Duration, error) {
	if v == "" {
		return 0, fmt.Errorf("%s is empty: give a duration such as \"2h\"", DurationAnnotation)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration such as \"2h\" or \"90m\"", DurationAnnotation, v)
	}
	if d < MinDuration || d > MaxDuration {
		return 0, fmt.Errorf("%s %q is out of range: between %s and %s", DurationAnnotation, v, MinDuration, formatDays(MaxDuration))
	}
	return d, nil
}

func formatDays(d time.Duration) string {
	return fmt.Sprintf("%dd (%s)", int(d/(24*time.Hour)), d)
}

// Names of the controller's admission webhook that withholds the default
// handling (package autonomy/webhook), for the tools that check it.
const (
	// WebhookConfigurationName is the ValidatingWebhookConfiguration's
	// default name.
	WebhookConfigurationName = "servicegroup-autonomy"
	// PodsWebhookName reviews a pod's Ready condition set to False.
	PodsWebhookName = "pods.autonomy.servicegroup.io"
	// NodesWebhookName reviews the unreachable NoExecute taint on a node.
	NodesWebhookName = "nodes.autonomy.servicegroup.io"
)
