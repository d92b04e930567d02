# shellcheck shell=bash
# older_release_bins BINARY STEM [--print-dir] [RELEASE...] builds BINARY
# (kube-proxy, kube-apiserver) alone for each release in hack/STEM-versions.txt
# (or the releases given), from the Go module proxy the way hack/k8s-bins.sh
# builds the current one, into a cache outside the repository keyed on
# (release, Go version):
#
#   $SERVICEGROUP_CACHE/BINARY-<release>-<go version>/bin/BINARY
#
# A release already cached is not rebuilt. With --print-dir it only prints
# the cache directory of each release, one per line, and builds nothing.
# Needs hack/lib/k8s-module.sh sourced.
older_release_bins() {
	local binary=$1 stem=$2 hack_dir
	shift 2
	hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	local go_version cache
	go_version=$(go env GOVERSION)
	cache=$(cache_root)

	local print_only=false
	if [ "${1:-}" = "--print-dir" ]; then
		print_only=true
		shift
	fi
	if [ $# -eq 0 ]; then
		local versions
		mapfile -t versions < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$hack_dir/$stem-versions.txt")
		set -- "${versions[@]}"
	fi

	# One build at a time: .ci/run and `make test` start the script in the
	# background while the tests that do not need these binaries run, and the
	# test that needs them runs it again for what it needs, which then waits
	# here for that build instead of starting a second one.
	if ! $print_only; then
		mkdir -p "$cache"
		exec 9>"$cache/$stem-bins.lock"
		flock 9
	fi

	export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
	local version dir work ldflags start
	for version in "$@"; do
		dir="$cache/$binary-$version-$go_version/bin"
		if $print_only || [ -x "$dir/$binary" ]; then
			echo "$dir"
			continue
		fi
		echo ">> building $binary $version from the Go module proxy (once; cached in $dir)" >&2
		work=$(mktemp -d)
		# shellcheck disable=SC2064 # $work is fixed now, on purpose
		trap "rm -rf '$work'" EXIT
		# The same flags as hack/k8s-bins.sh, plus the release in the binary's
		# version (its log, --version and build info say which it is).
		ldflags="-s -w $(k8s_version_ldflags "$version")"
		start=$SECONDS
		k8s_module "$work/k8s" "$version"
		k8s_build "$work/k8s" "$work/$binary" "$ldflags" "k8s.io/kubernetes/cmd/$binary"
		mkdir -p "$dir"
		# Rename into place: a concurrent run never sees half a binary.
		mv "$work/$binary" "$dir/$binary.tmp.$$"
		mv "$dir/$binary.tmp.$$" "$dir/$binary"
		rm -rf "$work"
		echo ">> $binary $version built in $((SECONDS - start))s" >&2
		echo "$dir"
	done
}
