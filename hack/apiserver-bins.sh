#!/usr/bin/env bash
# Builds kube-apiserver alone for each release in hack/apiserver-versions.txt
# (or the releases given as arguments), from the Go module proxy the way
# hack/kube-proxy-bins.sh builds the older kube-proxies, into a cache outside
# the repository keyed on (release, Go version):
#
#   $SERVICEGROUP_CACHE/kube-apiserver-<release>-<go version>/bin/kube-apiserver
#
# A release already cached is not rebuilt. With --print-dir it only prints
# the cache directory of each release, one per line, and builds nothing.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/lib/k8s-module.sh
. "$here/lib/k8s-module.sh"

GO_VERSION=$(go env GOVERSION)
CACHE_ROOT=${SERVICEGROUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup}

print_only=false
if [ "${1:-}" = "--print-dir" ]; then
	print_only=true
	shift
fi
if [ $# -eq 0 ]; then
	mapfile -t versions < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/apiserver-versions.txt")
	set -- "${versions[@]}"
fi

# One build at a time (.ci/run starts this in the background; a test run
# that needs the binaries then waits here instead of building again).
if ! $print_only; then
	mkdir -p "$CACHE_ROOT"
	exec 9>"$CACHE_ROOT/apiserver-bins.lock"
	flock 9
fi

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
for version in "$@"; do
	dir="$CACHE_ROOT/kube-apiserver-$version-$GO_VERSION/bin"
	if $print_only || [ -x "$dir/kube-apiserver" ]; then
		echo "$dir"
		continue
	fi
	echo ">> building kube-apiserver $version from the Go module proxy (once; cached in $dir)" >&2
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	ldflags="-s -w $(k8s_version_ldflags "$version")"
	start=$SECONDS
	k8s_module "$work/k8s" "$version"
	k8s_build "$work/k8s" "$work/kube-apiserver" "$ldflags" k8s.io/kubernetes/cmd/kube-apiserver
	mkdir -p "$dir"
	# Rename into place: a concurrent run never sees half a binary.
	mv "$work/kube-apiserver" "$dir/kube-apiserver.tmp.$$"
	mv "$dir/kube-apiserver.tmp.$$" "$dir/kube-apiserver"
	rm -rf "$work"
	echo ">> kube-apiserver $version built in $((SECONDS - start))s" >&2
	echo "$dir"
done
