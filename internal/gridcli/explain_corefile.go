package gridcli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coredns/caddy/caddyfile"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// restrictKeysOption is gridhosts' option under which keys a node can set
// on its own Node never match.
const restrictKeysOption = "require_node_restricted_keys"

// corefileKey is the ConfigMap key the shipped manifests and chart keep the
// Corefile under.
const corefileKey = "Corefile"

// nodeRestrictKeys tells whether node's own CoreDNS (its coredns-gridhosts
// pod, Corefile.node) sets require_node_restricted_keys, from the Corefile
// in the ConfigMap that pod mounts (in any namespace: the chart installs
// into its release's). where says what was read; known is false, with
// where saying why, when it cannot tell.
func nodeRestrictKeys(ctx context.Context, kube kubernetes.Interface, node string) (restrict bool, where string, known bool) {
	selector := nameLabel + "=" + corednsName
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return false, fmt.Sprintf("cannot list the pods %s on node %s: %v", selector, node, err), false
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			pods = append(pods, &list.Items[i])
		}
	}
	if len(pods) == 0 {
		return false, fmt.Sprintf("no pod %s on node %s (the node's CoreDNS, Corefile.node)", selector, node), false
	}
	// During a rolling update two pods run side by side: they must agree.
	var first string
	for i, p := range pods {
		r, from, err := podRestrictKeys(ctx, kube, p)
		if err != nil {
			return false, err.Error(), false
		}
		if i == 0 {
			restrict, first = r, from
			continue
		}
		if r != restrict {
			return false, fmt.Sprintf("the CoreDNS pods on node %s disagree: %s sets %s = %v, %s sets %v", node, first, restrictKeysOption, restrict, from, r), false
		}
	}
	return restrict, fmt.Sprintf("%s %s (read from %s)", restrictKeysOption, setOrNot(restrict), first), true
}

// podRestrictKeys reads the option from the Corefile of the ConfigMap pod
// mounts; from names both.
func podRestrictKeys(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) (restrict bool, from string, err error) {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, err := kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("cannot read ConfigMap %s/%s of pod %s/%s: %w", pod.Namespace, v.ConfigMap.Name, pod.Namespace, pod.Name, err)
		}
		text, ok := cm.Data[corefileKey]
		if !ok {
			continue
		}
		from = fmt.Sprintf("ConfigMap %s/%s of pod %s/%s", cm.Namespace, cm.Name, pod.Namespace, pod.Name)
		restrict, err := corefileRestrictKeys(text)
		if err != nil {
			return false, "", fmt.Errorf("%s: %w", from, err)
		}
		return restrict, from, nil
	}
	return false, "", fmt.Errorf("pod %s/%s mounts no ConfigMap with a %s key", pod.Namespace, pod.Name, corefileKey)
}

// corefileRestrictKeys reports whether the gridhosts blocks of Corefile
// text set require_node_restricted_keys: an error when it has none, or
// when they disagree.
func corefileRestrictKeys(text string) (bool, error) {
	blocks, err := caddyfile.Parse(corefileKey, strings.NewReader(text), nil)
	if err != nil {
		return false, fmt.Errorf("the Corefile does not parse: %w", err)
	}
	var found []bool
	for _, b := range blocks {
		tokens := b.Tokens[pluginDirective]
		for i := 0; i < len(tokens); i++ {
			if tokens[i].Text != pluginDirective || (i > 0 && tokens[i-1].Line == tokens[i].Line) {
				continue
			}
			// One gridhosts directive: its tokens up to the next one.
			set := false
			for j := i + 1; j < len(tokens) && !(tokens[j].Text == pluginDirective && tokens[j-1].Line != tokens[j].Line); j++ {
				// An option is the first word on its line.
				if tokens[j].Text == restrictKeysOption && tokens[j-1].Line != tokens[j].Line {
					set = true
				}
			}
			found = append(found, set)
		}
	}
	switch {
	case len(found) == 0:
		return false, fmt.Errorf("the Corefile has no %s block", pluginDirective)
	case slices.Contains(found, true) && slices.Contains(found, false):
		return false, fmt.Errorf("the Corefile's %s blocks disagree on %s", pluginDirective, restrictKeysOption)
	}
	return found[0], nil
}

// pluginDirective is gridhosts' directive in a Corefile.
const pluginDirective = "gridhosts"

func setOrNot(b bool) string {
	if b {
		return "set"
	}
	return "not set"
}
