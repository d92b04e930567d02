#!/usr/bin/env bash
# Builds promtool (Prometheus's rule tester) from the Go module proxy and
# takes prometheus-operator's CRDs (ServiceMonitor, PodMonitor,
# PrometheusRule) from its Go module, into a cache keyed on (Prometheus,
# prometheus-operator, Go). A second run with the same key is a no-op.
# Also builds the dashboard's schema checker (hack/grafana-dashboard-check.sh).
#
# Prints the directory (promtool, crds/) on its last line; with --print-dir
# it only prints it and builds nothing.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"

versions="$(dirname "$0")/monitoring-versions.env"
PROMETHEUS=$(sed -n 's/^PROMETHEUS=//p' "$versions")
OPERATOR=$(sed -n 's/^PROMETHEUS_OPERATOR=//p' "$versions")
DIR="$(cache_root)/monitoring-prometheus-$PROMETHEUS-operator-$OPERATOR-$(go env GOVERSION)"
CRDS=(servicemonitors podmonitors prometheusrules)

have_all() {
	local c
	[ -x "$DIR/promtool" ] || return 1
	for c in "${CRDS[@]}"; do
		[ -f "$DIR/crds/monitoring.coreos.com_$c.yaml" ] || return 1
	done
}

# The dashboard's schema checker, cached on its own key.
grafana=$("$(dirname "$0")/grafana-dashboard-check.sh" --print-path)
if [ "${1:-}" = "--print-dir" ] || { have_all && [ -x "$grafana" ]; }; then
	echo "$DIR"
	exit 0
fi

# One build at a time, the dashboard checker's included: a test that needs
# either tool waits while this lock is held (internal/testmonitoring).
mkdir -p "$DIR/crds"
exec 9>"$(cache_root)/monitoring-tools.lock"
flock 9
"$(dirname "$0")/grafana-dashboard-check.sh" >/dev/null
if have_all; then
	echo "$DIR"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
start=$SECONDS
(
	cd "$work"
	go mod init servicegroup.local/monitoring >/dev/null 2>&1
	echo ">> building promtool (Prometheus module $PROMETHEUS) from the Go module proxy (once; cached in $DIR)" >&2
	go get "github.com/prometheus/prometheus@$PROMETHEUS" >&2
	# remove_all_sd: none of Prometheus's service-discovery SDKs (cloud
	# providers' clients), which only `promtool check service-discovery` uses.
	go build -trimpath -tags remove_all_sd -ldflags "-s -w" -o "$DIR/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool
	if ! json=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$OPERATOR"); then
		echo "$json" >&2
		exit 1
	fi
	src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
	for c in "${CRDS[@]}"; do
		install -m 0644 "$src/example/prometheus-operator-crd/monitoring.coreos.com_$c.yaml" "$DIR/crds/"
	done
)
mv "$DIR/promtool.tmp" "$DIR/promtool"
echo ">> promtool and the prometheus-operator CRDs ready in $((SECONDS - start))s" >&2
echo "$DIR"
