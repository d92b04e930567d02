#!/usr/bin/env bash
# Builds SuperEdge's own application-grid-controller, application-grid-wrapper
# and statefulset-grid-daemon (hack/superedge-versions.env) from the Go module
# proxy, the way hack/k8s-bins.sh builds Kubernetes: a throwaway module
# outside the repository (none of SuperEdge's source is kept here), one
# `go build` for the three, cached keyed on (SuperEdge release, Go version):
#
#   $SERVICEGROUP_CACHE/superedge-<release>-<go version>/bin/<binary>
#   $SERVICEGROUP_CACHE/superedge-<release>-<go version>/manifests/
#
# manifests/ holds the grid CRDs the controller's image carries (its CRD
# preparator reads them from /etc/superedge/application-grid-controller/
# manifests and applies them at start and every minute), taken from the same
# module.
#
# The real-node test's SuperEdge phase packages them as images
# (test/realnode/superedgeimages.go). It also builds (hack/kube-proxy-bins.sh)
# the kube-proxy release SuperEdge's wrapper can still serve
# (SUPEREDGE_KUBE_PROXY in the env file), which edge nodes run behind it. A
# second run with the same keys is a no-op. Prints the bin directory on its
# last line; with --print-dir it only prints it and builds nothing.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"

versions="$(dirname "$0")/superedge-versions.env"
SUPEREDGE=$(sed -n 's/^SUPEREDGE=//p' "$versions")
REFLECT2=$(sed -n 's/^REFLECT2=//p' "$versions")
KUBE_PROXY=$(sed -n 's/^SUPEREDGE_KUBE_PROXY=//p' "$versions")
BIN_DIR="$(cache_root)/superedge-$SUPEREDGE-$(go env GOVERSION)/bin"
MANIFESTS="$(dirname "$BIN_DIR")/manifests"
CMDS=(application-grid-controller application-grid-wrapper statefulset-grid-daemon)
CRDS=(deploymentgrids statefulsetgrids servicegrids)

have_all() {
	local b c
	for b in "${CMDS[@]}"; do
		[ -x "$BIN_DIR/$b" ] || return 1
	done
	for c in "${CRDS[@]}"; do
		[ -f "$MANIFESTS/superedge.io_$c.yaml" ] || return 1
	done
}

if [ "${1:-}" = "--print-dir" ]; then
	echo "$BIN_DIR"
	exit 0
fi
# Its own cache and lock; a no-op once built. At its own dependency
# versions from the start: v1.33's apimachinery wants structured-merge-diff
# v4 and its cri-client an older otelgrpc, so at this project's versions it
# fails, on every fresh machine, after compiling k8s.io/api and much of its
# tree (the fresh .ci/run of 2026-12-06 compiled k8s.io/api v0.33.13 twice).
K8S_DEPS=own "$(dirname "$0")/kube-proxy-bins.sh" "$KUBE_PROXY" >&2
if have_all; then
	echo "$BIN_DIR"
	exit 0
fi

mkdir -p "$BIN_DIR"
build_once "$(cache_root)/superedge-bins.lock" "$BIN_DIR"
start=$SECONDS
echo ">> building SuperEdge $SUPEREDGE's ${CMDS[*]} from the Go module proxy (once; cached in $BIN_DIR)" >&2
(
	cd "$work"
	go mod init servicegroup.local/superedge >/dev/null 2>&1
	go get "github.com/superedge/superedge@$SUPEREDGE" >&2
	# The one dependency that has to move for today's Go (see the env file);
	# the rest stays at SuperEdge's own versions.
	go get "github.com/modern-go/reflect2@$REFLECT2" >&2
	printf '//go:build tools\n\npackage tools\n' >tools.go
	pkgs=()
	for b in "${CMDS[@]}"; do
		pkgs+=("github.com/superedge/superedge/cmd/$b")
		echo "import _ \"github.com/superedge/superedge/cmd/$b\"" >>tools.go
	done
	go mod tidy >&2
	# SuperEdge's own build stamps its release into pkg/version (its
	# binaries' --version and logs say which they are).
	ldflags="-s -w -X github.com/superedge/superedge/pkg/version.gitVersion=$SUPEREDGE"
	mkdir -p out
	go build -tags tools -trimpath -ldflags "$ldflags" -o out/ "${pkgs[@]}"
	src=$(go list -m -f '{{.Dir}}' github.com/superedge/superedge)
	mkdir -p "$MANIFESTS"
	for c in "${CRDS[@]}"; do
		install -m 0644 "$src/pkg/application-grid-controller/manifests/superedge.io_$c.yaml" "$MANIFESTS/"
	done
	# Renamed into place: a concurrent reader never sees half a binary.
	for b in "${CMDS[@]}"; do
		mv "out/$b" "$BIN_DIR/$b.tmp.$$"
		mv "$BIN_DIR/$b.tmp.$$" "$BIN_DIR/$b"
	done
)
have_all
echo ">> SuperEdge $SUPEREDGE built in $((SECONDS - start))s, $(du -sh "$BIN_DIR" | cut -f1)" >&2
echo "$BIN_DIR"
