#!/usr/bin/env bash
# Builds, from the Go module proxy, into a cache keyed on (Prometheus,
# prometheus-operator, Go); a second run with the same key is a no-op:
#
# 1. promtool (Prometheus's rule tester), prometheus-operator's CRDs
#    (ServiceMonitor, PodMonitor, PrometheusRule) and the dashboard's schema checker (hack/grafana-dashboard-check.sh),
#    under monitoring-tools.lock: the alert and monitoring-component tests;
# 2. the Prometheus server, prometheus-operator and its
#    prometheus-config-reloader, all of the operator's CRDs (operator-crds/)
#    and its example RBAC and Deployment (operator-rbac/), under
#    monitoring-servers.lock: the real-node test
#    runs them on its cluster. Their own lock, so that a
#    test waiting for promtool does not wait for these larger builds.
#
# Prometheus's commands build in the tools module helm and cosign share,
# at this project's dependency versions (hack/lib/tools-module.sh), one go
# build in it at a time; the operator's in a module of its own, at its
# go.mod's versions (it requires an older Prometheus module and
# controller-runtime at its own k8s.io release).
#
# Prints the directory (promtool, crds/, prometheus, operator,
# prometheus-config-reloader, operator-crds/, operator-rbac/) on its last line; with --print-dir it
# only prints it and builds nothing; with --tools it stops after 1.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"
# shellcheck source=hack/lib/tools-module.sh
. "$(dirname "$0")/lib/tools-module.sh"

versions="$(dirname "$0")/monitoring-versions.env"
PROMETHEUS=$(sed -n 's/^PROMETHEUS=//p' "$versions")
OPERATOR=$(sed -n 's/^PROMETHEUS_OPERATOR=//p' "$versions")
DIR="$(cache_root)/monitoring-prometheus-$PROMETHEUS-operator-$OPERATOR-$(go env GOVERSION)"
CRDS=(servicemonitors podmonitors prometheusrules)
SERVERS=(prometheus operator prometheus-config-reloader)

have_tools() {
	local c
	[ -x "$DIR/promtool" ] || return 1
	for c in "${CRDS[@]}"; do
		[ -f "$DIR/crds/monitoring.coreos.com_$c.yaml" ] || return 1
	done
}

have_binaries() {
	local b
	for b in "${SERVERS[@]}"; do
		[ -x "$DIR/$b" ] || return 1
	done
}

have_examples() {
	[ -f "$DIR/operator-crds/monitoring.coreos.com_prometheuses.yaml" ] &&
		[ -f "$DIR/operator-rbac/prometheus-operator/prometheus-operator-deployment.yaml" ] &&
		[ -f "$DIR/operator-rbac/prometheus/prometheus-cluster-role.yaml" ]
}

# The dashboard's schema checker, cached on its own key.
grafana=$("$(dirname "$0")/grafana-dashboard-check.sh" --print-path)
if [ "${1:-}" = "--print-dir" ] || { have_tools && [ -x "$grafana" ] && { [ "${1:-}" = "--tools" ] || { have_binaries && have_examples; }; }; }; then
	echo "$DIR"
	exit 0
fi

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOGC="$(build_gogc)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# module NAME: a throwaway Go module under $work, its directory printed.
module() {
	mkdir -p "$work/$1"
	(cd "$work/$1" && go mod init "servicegroup.local/$1" >/dev/null 2>&1)
	echo "$work/$1"
}

# shared_module: the tools module (made once a run), its directory printed.
shared_module() {
	[ -f "$work/tools/go.mod" ] || tools_module "$work/tools" || return
	echo "$work/tools"
}

# 1. One build at a time, the dashboard checker's included: a test that
# needs either tool waits while this lock is held (internal/testmonitoring).
mkdir -p "$DIR/crds"
exec 9>"$(cache_root)/monitoring-tools.lock"
flock 9
"$(dirname "$0")/grafana-dashboard-check.sh" >/dev/null
if ! have_tools; then
	start=$SECONDS
	(
		if [ ! -x "$DIR/promtool" ]; then
			echo ">> building promtool (Prometheus module $PROMETHEUS) from the Go module proxy (once; cached in $DIR)" >&2
			tools=$(shared_module)
			cd "$tools"
			tools_build_lock
			# remove_all_sd: none of Prometheus's service-discovery SDKs (cloud
			# providers' clients), which only `promtool check service-discovery` uses.
			go build -trimpath -tags remove_all_sd -ldflags "-s -w" -o "$DIR/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool
			mv "$DIR/promtool.tmp" "$DIR/promtool"
		fi
		if ! json=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$OPERATOR"); then
			echo "$json" >&2
			exit 1
		fi
		src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
		for c in "${CRDS[@]}"; do
			install -m 0644 "$src/example/prometheus-operator-crd/monitoring.coreos.com_$c.yaml" "$DIR/crds/"
		done
	)
	echo ">> promtool and the prometheus-operator CRDs ready in $((SECONDS - start))s" >&2
fi
exec 9>&-
if [ "${1:-}" = "--tools" ]; then
	echo "$DIR"
	exit 0
fi

# 2. The servers, under their own lock.
exec 8>"$(cache_root)/monitoring-servers.lock"
flock 8
if ! have_binaries; then
	start=$SECONDS
	echo ">> building Prometheus $PROMETHEUS and prometheus-operator $OPERATOR from the Go module proxy (once; cached in $DIR)" >&2
	(
		tools=$(shared_module)
		cd "$tools"
		tools_build_lock
		# The server discovers targets only as prometheus-operator's
		# configuration asks (Kubernetes service discovery); its web UI's
		# assets are left out (builtinassets unset): the API is what is used.
		# Its release stamped as its own build does (v0.MNN.P is M.NN.P).
		minor=${PROMETHEUS#v0.}
		release="$((${minor%%.*} / 100)).$((${minor%%.*} % 100)).${minor#*.}"
		go build -trimpath -tags remove_all_sd,enable_kubernetes_sd -o "$DIR/prometheus.tmp" \
			-ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
			github.com/prometheus/prometheus/cmd/prometheus
	)
	(
		cd "$(module operator)"
		# The operator's go.mod replaces its two API modules with its own
		# directories, which a consumer does not inherit: they are required
		# at the same release.
		go get "github.com/prometheus-operator/prometheus-operator@$OPERATOR" \
			"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$OPERATOR" \
			"github.com/prometheus-operator/prometheus-operator/pkg/client@$OPERATOR" >&2
		mkdir -p out
		go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${OPERATOR#v}" -o out/ \
			github.com/prometheus-operator/prometheus-operator/cmd/operator \
			github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader
		mv out/operator "$DIR/operator.tmp"
		mv out/prometheus-config-reloader "$DIR/prometheus-config-reloader.tmp"
	)
	for b in "${SERVERS[@]}"; do
		mv "$DIR/$b.tmp" "$DIR/$b"
	done
	echo ">> Prometheus, prometheus-operator and prometheus-config-reloader built in $((SECONDS - start))s" >&2
fi
if ! have_examples; then
	# The operator's CRDs and its example RBAC and Deployment, from its module.
	if ! json=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$OPERATOR"); then
		echo "$json" >&2
		exit 1
	fi
	src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")
	mkdir -p "$DIR/operator-crds" "$DIR/operator-rbac/prometheus-operator" "$DIR/operator-rbac/prometheus"
	install -m 0644 "$src"/example/prometheus-operator-crd/*.yaml "$DIR/operator-crds/"
	install -m 0644 "$src"/example/rbac/prometheus-operator/*.yaml "$DIR/operator-rbac/prometheus-operator/"
	install -m 0644 "$src"/example/rbac/prometheus/*.yaml "$DIR/operator-rbac/prometheus/"
fi
echo "$DIR"
