#!/usr/bin/env bash
# Builds hack/grafana-dashboard-check (Grafana's dashboard schema, from
# grafana-foundation-sdk on the Go module proxy, as a checker) into a cache
# keyed on its source, go.mod and go.sum, and Go. A second run with the same
# key is a no-op. hack/monitoring-tools.sh runs it.
#
# Prints the binary's path on its last line; with --print-path it only
# prints it and builds nothing.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"

src="$(cd "$(dirname "$0")/grafana-dashboard-check" && pwd)"
key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
BIN="$(cache_root)/grafana-dashboard-check-$key-$(go env GOVERSION)/grafana-dashboard-check"

if [ "${1:-}" = "--print-path" ] || [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$(dirname "$BIN")"
exec 9>"$(dirname "$BIN").lock"
flock 9
if [ -x "$BIN" ]; then
	echo "$BIN"
	exit 0
fi
start=$SECONDS
echo ">> building grafana-dashboard-check (grafana-foundation-sdk from the Go module proxy; once, cached in $(dirname "$BIN"))" >&2
(cd "$src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .)
mv "$BIN.tmp" "$BIN"
echo ">> grafana-dashboard-check ready in $((SECONDS - start))s" >&2
echo "$BIN"
