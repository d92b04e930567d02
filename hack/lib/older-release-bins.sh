# shellcheck shell=bash
# older_release_bins BINARY STEM [--print-dir] [RELEASE...] builds BINARY
# (kube-proxy, kube-apiserver) for each release in hack/STEM-versions.txt
# (or the releases given), from the Go module proxy the way hack/k8s-bins.sh
# builds the current one, into a cache outside the repository keyed on
# (binary, release, Go version):
#
#   $SERVICEGROUP_CACHE/BINARY-<release>-<go version>/bin/BINARY
#
# A release already cached is not rebuilt. With --print-dir it only prints
# the cache directory of each release, one per line, and builds nothing.
# Needs hack/lib/k8s-module.sh sourced.
#
# Every dependency compiles once:
#   - one `go build` per release makes every older binary the lists want of
#     it (OLDER_RELEASE_LISTS: kube-proxy beside kube-apiserver when both
#     lists name the release), so the packages they share (k8s.io/api,
#     apimachinery, client-go, component-base: most of kube-proxy) compile
#     once, and the release's module is resolved once;
#   - each release's dependencies outside its own k8s.io modules (x/net,
#     grpc, protobuf, otel, ...) are raised to the versions this project
#     compiles (k8s_share_project_versions, as hack/k8s-bins.sh does), so
#     the two releases share them with each other, with the current
#     release and with `make build`, instead of each compiling its own
#     (should a release not build with them, it is built with its own);
#   - one build at a time, under one lock for every older release: two
#     builds started together compile the same packages side by side (Go's
#     build cache shares a package only once one build has finished it), and
#     on two cores each makes the other slower.
#
# .ci/run and `make test` start hack/older-release-bins.sh in the background
# at a low priority; a test that needs a binary runs its script for the
# missing releases, which waits here for that build.

# OLDER_RELEASE_LISTS pairs each older-release binary with the stem of its
# list of releases (hack/STEM-versions.txt).
OLDER_RELEASE_LISTS=("kube-apiserver:apiserver" "kube-proxy:kube-proxy")

# older_release_versions STEM prints the releases of hack/STEM-versions.txt.
older_release_versions() {
	local hack_dir
	hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]//g' "$hack_dir/$1-versions.txt"
}

# older_release_dir BINARY RELEASE prints the cache directory of BINARY at
# RELEASE (test/controlplane's OlderReleases is the same rule).
older_release_dir() {
	echo "$(cache_root)/$1-$2-$(go env GOVERSION)/bin"
}

older_release_bins() {
	local binary=$1 stem=$2
	shift 2
	local print_only=false
	if [ "${1:-}" = "--print-dir" ]; then
		print_only=true
		shift
	fi
	if [ $# -eq 0 ]; then
		local versions
		mapfile -t versions < <(older_release_versions "$stem")
		set -- "${versions[@]}"
	fi
	if $print_only; then
		local v
		for v in "$@"; do older_release_dir "$binary" "$v"; done
		return
	fi

	# Held until the script exits (a test waits while it is held), taken once
	# when one script builds for every list.
	if [ -z "${older_release_locked:-}" ]; then
		mkdir -p "$(cache_root)"
		exec 9>"$(cache_root)/older-release-bins.lock"
		flock 9
		older_release_locked=1
	fi

	export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOGC="$(build_gogc)"
	local version dir work start pair other other_stem b
	local -a binaries pkgs
	for version in "$@"; do
		dir=$(older_release_dir "$binary" "$version")
		if [ -x "$dir/$binary" ]; then
			echo "$dir"
			continue
		fi
		# This binary, and every other one whose list names the release and
		# is not built yet.
		binaries=("$binary")
		for pair in "${OLDER_RELEASE_LISTS[@]}"; do
			other=${pair%%:*} other_stem=${pair#*:}
			[ "$other" = "$binary" ] && continue
			[ -x "$(older_release_dir "$other" "$version")/$other" ] && continue
			if older_release_versions "$other_stem" | grep -qxF "$version"; then
				binaries+=("$other")
			fi
		done
		echo ">> building ${binaries[*]} $version from the Go module proxy (once; cached in $(cache_root)/<binary>-$version-$(go env GOVERSION))" >&2
		work=$(mktemp -d)
		# shellcheck disable=SC2064 # $work is fixed now, on purpose
		trap "rm -rf '$work'" EXIT
		start=$SECONDS
		pkgs=()
		for b in "${binaries[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
		mkdir -p "$work/out"
		k8s_build_release "$work/k8s" "$work/out/" "$version" "${pkgs[@]}"
		for b in "${binaries[@]}"; do
			dir=$(older_release_dir "$b" "$version")
			mkdir -p "$dir"
			# Rename into place: a concurrent run never sees half a binary.
			mv "$work/out/$b" "$dir/$b.tmp.$$"
			mv "$dir/$b.tmp.$$" "$dir/$b"
		done
		rm -rf "$work"
		echo ">> ${binaries[*]} $version built in $((SECONDS - start))s" >&2
		older_release_dir "$binary" "$version"
	done
}
