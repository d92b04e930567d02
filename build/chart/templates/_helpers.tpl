{{/*
Hand-written helpers of the generated templates (internal/chartgen).
*/}}

{{/* servicegroup.image: (list $ NAME [KEY]) -> REPOSITORY/NAME@DIGEST, or :TAG (default: appVersion).
The digest is image.digests.KEY when set, else image.digests.NAME. */}}
{{- define "servicegroup.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $img := $root.Values.image -}}
{{- $digests := default dict $img.digests -}}
{{- $digest := index $digests $name | default "" -}}
{{- if gt (len .) 2 }}{{ $digest = index $digests (index . 2) | default $digest }}{{ end -}}
{{- if $digest -}}
{{ $img.repository }}/{{ $name }}@{{ $digest }}
{{- else -}}
{{ $img.repository }}/{{ $name }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The controller's flags beyond the manifests' (nothing at the defaults). */}}
{{- define "servicegroup.controller.args" -}}
{{- $c := .Values.controller -}}
{{- $args := list -}}
{{- if not $c.manageCRDs }}{{ $args = append $args "--manage-crds=false" }}{{ end -}}
{{- with $c.nodeunitDeletionGracePeriod }}{{ $args = append $args (printf "--nodeunit-deletion-grace-period=%s" .) }}{{ end -}}
{{- if eq $c.superedgeLock "-" }}{{ $args = append $args "--superedge-lock=" }}{{ else if $c.superedgeLock }}{{ $args = append $args (printf "--superedge-lock=%s" $c.superedgeLock) }}{{ end -}}
{{- with $c.workers }}{{ $args = append $args (printf "--workers=%d" (int .)) }}{{ end -}}
{{- with $c.resync }}{{ $args = append $args (printf "--resync=%s" .) }}{{ end -}}
{{- with $c.zoneFromGridKey }}{{ $args = append $args (printf "--zone-from-grid-key=%s" .) }}{{ end -}}
{{- if .Values.gridKeys.requireNodeRestricted }}{{ $args = append $args "--require-node-restricted-grid-keys" }}{{ end -}}
{{- if eq .Values.logging.format "json" }}{{ $args = append $args "--logging-format=json" }}{{ end -}}
{{- include "servicegroup.list" (concat $args $c.extraArgs) -}}
{{- end -}}

{{/* The wrapper's flags beyond the manifests'. */}}
{{- define "servicegroup.wrapper.args" -}}
{{- $w := .Values.wrapper -}}
{{- $args := list -}}
{{- with $w.snapshotInterval }}{{ $args = append $args (printf "--snapshot-interval=%s" .) }}{{ end -}}
{{- with $w.snapshotMaxAge }}{{ $args = append $args (printf "--snapshot-max-age=%s" .) }}{{ end -}}
{{- if .Values.gridKeys.requireNodeRestricted }}{{ $args = append $args "--require-node-restricted-topology-keys" }}{{ end -}}
{{- if eq .Values.logging.format "json" }}{{ $args = append $args "--logging-format=json" }}{{ end -}}
{{- include "servicegroup.list" (concat $args $w.extraArgs) -}}
{{- end -}}

{{/* CoreDNS's flags beyond the manifests' (per-node and shared). */}}
{{- define "servicegroup.coredns.args" -}}
{{- $args := list -}}
{{- if eq .Values.logging.format "json" }}{{ $args = concat $args (list "-log-format" "json") }}{{ end -}}
{{- include "servicegroup.list" (concat $args .Values.corednsNode.extraArgs) -}}
{{- end -}}

{{/* servicegroup.list: a YAML list of quoted strings, nothing for none. */}}
{{- define "servicegroup.list" -}}
{{- range $i, $a := . }}{{ if $i }}{{ "\n" }}{{ end }}- {{ $a | quote }}{{ end -}}
{{- end -}}
