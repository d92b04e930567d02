package chartgen

import (
	"fmt"
	"regexp"
	"strings"
)

// Substitution puts a chart value into the rendered YAML of the resources
// it names: every match of re in them is replaced by repl (regexp.Expand
// syntax: ${1} is the first group). Each must match in every render of a
// resource it names, and somewhere in the chart, so that a change to
// build/manifests that moves what it replaces fails the generator instead of
// silently dropping a value.
type Substitution struct {
	name string
	ids  []string // kind/namespace/name; "*" for every resource
	re   *regexp.Regexp
	repl string
	// optional: a resource it names may lack the match (a value that only
	// some of its renders carry, e.g. a component's flag).
	optional bool
}

// Images is the name of each of our images under ManifestRepository; the
// chart's servicegroup.image helper writes the reference.
var images = []string{"application-grid-controller", "application-grid-wrapper", "coredns-gridhosts"}

const (
	controllerDeployment = "Deployment/servicegroup-system/application-grid-controller"
	wrapperDaemonSet     = "DaemonSet/edge-system/application-grid-wrapper"
	corednsDaemonSet     = "DaemonSet/edge-system/coredns-gridhosts"
	corednsSharedDeploy  = "Deployment/edge-system/coredns-gridhosts-shared"
	upstreamConfigMap    = "ConfigMap/edge-system/servicegroup-upstream"
	edgeNamespace        = "Namespace//edge-system"
	metricsReaderBinding = "ClusterRoleBinding//servicegroup:metrics-reader"
	edgeNodeBinding      = "ClusterRoleBinding//servicegroup:edge-node"
)

// corednsHelpersDigest is the digest key of the wrapper image as the node
// CoreDNS's init containers run it (it falls back to the wrapper's own):
// the guide's first `helm upgrade` moves the wrappers to a new digest while
// this one keeps the CoreDNS pods as they are, and its second moves both,
// so that CoreDNS rolls only once every wrapper runs again.
const corednsHelpersDigest = "coredns-gridhosts-helpers"

// substitutions are the chart's values in the manifests of release version.
func substitutions(version string) []Substitution {
	s := []Substitution{{
		name: "CoreDNS's helper images", ids: []string{corednsDaemonSet},
		re:   regexp.MustCompile(`(?m)^(\s*(?:- )?image: )servicegroup/application-grid-wrapper:` + regexp.QuoteMeta(version) + `$`),
		repl: `${1}{{ include "servicegroup.image" (list . "application-grid-wrapper" "` + corednsHelpersDigest + `") }}`,
	}}
	for _, img := range images {
		s = append(s, Substitution{
			name: "image " + img,
			ids:  []string{"*"},
			re:   regexp.MustCompile(`(?m)^(\s*(?:- )?image: )servicegroup/` + regexp.QuoteMeta(img+":"+version) + `$`),
			repl: `${1}{{ include "servicegroup.image" (list . "` + img + `") }}`,
		})
	}
	s = append(s,
		Substitution{
			name: "pull policy", ids: []string{"*"},
			re:   regexp.MustCompile(`(?m)^(\s*imagePullPolicy: )IfNotPresent$`),
			repl: `${1}{{ .Values.image.pullPolicy }}`,
		},
		Substitution{
			name: "kube-proxy image", ids: []string{"DaemonSet/kube-system/kube-proxy-edge"},
			re:   regexp.MustCompile(`(?m)^(\s*(?:- )?image: )registry\.k8s\.io/kube-proxy:\S+$`),
			repl: `${1}{{ .Values.kubeProxy.image }}`,
		},
		Substitution{
			name: "upstream host", ids: []string{upstreamConfigMap},
			re:   regexp.MustCompile(`(?m)^(\s*KUBERNETES_SERVICE_HOST: ).*$`),
			repl: `${1}{{ .Values.upstream.host | quote }}`,
		},
		Substitution{
			name: "upstream port", ids: []string{upstreamConfigMap},
			re:   regexp.MustCompile(`(?m)^(\s*KUBERNETES_SERVICE_PORT: ).*$`),
			repl: `${1}{{ .Values.upstream.port | quote }}`,
		},
		// The node-local address: the Corefile's bind (and its comments)
		// and the init container that puts it on lo.
		Substitution{
			name: "node-local address", ids: []string{"ConfigMap/edge-system/coredns-gridhosts-*", corednsDaemonSet},
			re:   regexp.MustCompile(`169\.254\.20\.10\b`),
			repl: `{{ .Values.nodeLocalDNS.address }}`,
		},
		Substitution{
			name: "gridhosts node-restricted keys", ids: []string{"ConfigMap/edge-system/coredns-gridhosts-*", "ConfigMap/edge-system/coredns-gridhosts-shared-*"},
			re:   regexp.MustCompile(`(?m)^(\s*)(gridhosts [^\n]*\{\n)`),
			repl: "${1}${2}{{- if .Values.gridKeys.requireNodeRestricted }}\n${1}    require_node_restricted_keys\n{{- end }}\n",
		},
		Substitution{
			name: "controller replicas", ids: []string{controllerDeployment},
			re:   regexp.MustCompile(`(?m)^(  replicas: )2$`),
			repl: `${1}{{ .Values.controller.replicas }}`,
		},
		argsAfter("controller args", controllerDeployment, `- --v=2`, "servicegroup.controller.args"),
		argsAfter("wrapper args", wrapperDaemonSet, `- --v=2`, "servicegroup.wrapper.args"),
		argsAfter("coredns args", corednsDaemonSet, `- /etc/coredns/Corefile`, "servicegroup.coredns.args"),
		argsAfter("shared coredns args", corednsSharedDeploy, `- /etc/coredns/Corefile`, "servicegroup.coredns.args"),
		Substitution{
			name: "site label", ids: []string{wrapperDaemonSet}, optional: true,
			re:   regexp.MustCompile(`--site-label=servicegroup\.io/site\b`),
			repl: `--site-label={{ .Values.siteStream.siteLabel }}`,
		},
		Substitution{
			name: "metrics reader subject", ids: []string{metricsReaderBinding},
			re:   regexp.MustCompile(`(?m)^(- kind: ServiceAccount\n  name: )prometheus-k8s\n(  namespace: )monitoring$`),
			repl: "${1}{{ .Values.monitoring.prometheus.serviceAccount }}\n${2}{{ .Values.monitoring.prometheus.namespace }}",
		},
		// The static-pod option's read rights (every Pod among them) for
		// the named static-pod nodes only, instead of every node.
		Substitution{
			name: "static-pod nodes", ids: []string{edgeNodeBinding},
			re:   regexp.MustCompile(`(?m)^subjects:\n(- apiGroup: rbac\.authorization\.k8s\.io\n  kind: Group\n  name: system:nodes\n)`),
			repl: "subjects:\n{{- with .Values.staticPods.nodes }}\n{{- range . }}\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: system:node:{{ . }}\n{{- end }}\n{{- else }}\n${1}{{- end }}\n",
		},
		// Helm deletes what it installed on uninstall; edge-system stays, as
		// the kustomize uninstall keeps prerequisites (SuperEdge shares it).
		Substitution{
			name: "keep edge-system", ids: []string{edgeNamespace},
			re:   regexp.MustCompile(`(?m)^metadata:\n`),
			repl: "metadata:\n  annotations:\n    helm.sh/resource-policy: keep\n",
		},
	)
	return s
}

// argsAfter appends the list a helper prints after the line anchor of a
// container's args, at the anchor's indentation (nothing when it prints
// nothing: the default render is kustomize's).
func argsAfter(name, id, anchor, helper string) Substitution {
	return Substitution{
		name: name, ids: []string{id},
		re:   regexp.MustCompile(`(?m)^( *)(` + regexp.QuoteMeta(anchor) + `\n)`),
		repl: "${1}${2}{{- with include \"" + helper + "\" . }}\n{{ . | indent ${INDENT} }}\n{{- end }}\n",
	}
}

// braces escapes the template delimiters already in the YAML (alert
// annotations' {{ $labels.node }}) so that Helm prints them verbatim.
var braces = strings.NewReplacer("{{", `{{ "{{" }}`, "}}", `{{ "}}" }}`)

// substitute applies s to text, the YAML of resource id, marking used
// the substitutions that matched.
func substitute(id, text string, s []Substitution, used []bool) (string, error) {
	text = braces.Replace(text)
	for i, sub := range s {
		if !names(sub.ids, id) {
			continue
		}
		matches := sub.re.FindAllStringSubmatchIndex(text, -1)
		if len(matches) == 0 {
			if sub.ids[0] == "*" || sub.optional {
				continue
			}
			return "", fmt.Errorf("%s: substitution %q matches nothing: build/manifests changed, update internal/chartgen", id, sub.name)
		}
		used[i] = true
		var b strings.Builder
		last := 0
		for _, m := range matches {
			b.WriteString(text[last:m[0]])
			repl := sub.repl
			if strings.Contains(repl, "${INDENT}") {
				// The anchor's indentation (group 1), as a number for indent.
				repl = strings.ReplaceAll(repl, "${INDENT}", fmt.Sprint(m[3]-m[2]))
			}
			b.Write(sub.re.ExpandString(nil, repl, text, m))
			last = m[1]
		}
		b.WriteString(text[last:])
		text = b.String()
	}
	return text, nil
}

// names reports whether pattern list ids names id ("*" names every
// resource; a trailing "-*" stands for kustomize's hash suffix, which has
// no dash).
func names(ids []string, id string) bool {
	for _, p := range ids {
		if p == "*" || p == id {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if rest, ok := strings.CutPrefix(id, prefix); ok && rest != "" && !strings.Contains(rest, "-") {
				return true
			}
		}
	}
	return false
}
