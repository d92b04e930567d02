#!/usr/bin/env bash
# Builds the real Kubernetes binaries the tests run (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, kubelet, kubectl) from the Go
# module proxy, into a cache outside the repository keyed on (Kubernetes
# version, etcd version, Go version). A second run with the same key is a no-op.
#
# Prints the directory holding the binaries on its last line; with
# --print-dir it only prints that directory and builds nothing.
#
#   K8S_VERSION   Kubernetes release (default: test/controlplane/versions.env)
#   ETCD_VERSION  etcd server release (default: likewise)
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"

K8S_VERSION=${K8S_VERSION:-$(pinned KUBERNETES)}
ETCD_VERSION=${ETCD_VERSION:-$(pinned ETCD)}
GO_VERSION=$(go env GOVERSION)
CACHE_ROOT=$(cache_root)
BIN_DIR="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$GO_VERSION/bin"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)

have_all() {
	local b
	for b in etcd "${K8S_CMDS[@]}"; do
		[ -x "$BIN_DIR/$b" ] || return 1
	done
}

if [ "${1:-}" = "--print-dir" ]; then
	echo "$BIN_DIR"
	exit 0
fi

if have_all; then
	echo "$BIN_DIR"
	exit 0
fi

mkdir -p "$BIN_DIR"
build_once "$CACHE_ROOT/k8s-bins.lock" "$BIN_DIR"
ldflags="-s -w"

if [ ! -x "$BIN_DIR/etcd" ]; then
	echo ">> building etcd $ETCD_VERSION from the Go module proxy (once; cached in $BIN_DIR)" >&2
	mkdir -p "$work/etcd"
	cat >"$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	(
		cd "$work/etcd"
		go mod init servicegroup.local/etcd >/dev/null 2>&1
		go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
		go mod tidy >&2
		go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/etcd.tmp" .
	)
	mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
fi

missing=()
for b in "${K8S_CMDS[@]}"; do
	[ -x "$BIN_DIR/$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo ">> building ${missing[*]} $K8S_VERSION from the Go module proxy (once, about 13 minutes from a cold cache on 2 cores; cached in $BIN_DIR)" >&2
	pkgs=()
	for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	# One `go build` for all of them: the packages they share compile once.
	k8s_build_release "$work/k8s" "$BIN_DIR/" "$K8S_VERSION" "${pkgs[@]}"
fi

have_all
echo "$BIN_DIR"
