#!/usr/bin/env bash
# Builds kube-proxy alone for each release in hack/kube-proxy-versions.txt
# (or the releases given as arguments), from the Go module proxy the way
# hack/k8s-bins.sh builds the current one, into a cache outside the
# repository keyed on (release, Go version):
#
#   $SERVICEGROUP_CACHE/kube-proxy-<release>-<go version>/bin/kube-proxy
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
CACHE_ROOT=$(cache_root)

print_only=false
if [ "${1:-}" = "--print-dir" ]; then
	print_only=true
	shift
fi
if [ $# -eq 0 ]; then
	mapfile -t versions < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/kube-proxy-versions.txt")
	set -- "${versions[@]}"
fi

# One build at a time: `make test` starts this script in the background while
# the tests that do not need these binaries run, and the version matrix test
# runs it again for what it needs, which then waits here for that build
# instead of starting a second one.
if ! $print_only; then
	mkdir -p "$CACHE_ROOT"
	exec 9>"$CACHE_ROOT/kube-proxy-bins.lock"
	flock 9
fi

export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
for version in "$@"; do
	dir="$CACHE_ROOT/kube-proxy-$version-$GO_VERSION/bin"
	if $print_only || [ -x "$dir/kube-proxy" ]; then
		echo "$dir"
		continue
	fi
	echo ">> building kube-proxy $version from the Go module proxy (once: about 6 minutes of CPU, 25 on 2 busy cores; cached in $dir)" >&2
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	# The same flags as hack/k8s-bins.sh, plus the release in the binary's
	# version (its log, --version and kubernetes_build_info say which it is).
	ldflags="-s -w $(k8s_version_ldflags "$version")"
	start=$SECONDS
	k8s_module "$work/k8s" "$version"
	k8s_build "$work/k8s" "$work/kube-proxy" "$ldflags" k8s.io/kubernetes/cmd/kube-proxy
	mkdir -p "$dir"
	# Rename into place: a concurrent run never sees half a binary.
	mv "$work/kube-proxy" "$dir/kube-proxy.tmp.$$"
	mv "$dir/kube-proxy.tmp.$$" "$dir/kube-proxy"
	rm -rf "$work"
	echo ">> kube-proxy $version built in $((SECONDS - start))s" >&2
	echo "$dir"
done
