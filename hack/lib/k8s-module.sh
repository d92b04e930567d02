# shellcheck shell=bash
# Sourced by hack/k8s-bins.sh, hack/monitoring-tools.sh, hack/release-tools.sh,
# hack/superedge-bins.sh and the older-release scripts (hack/lib/older-release-bins.sh).

# project_root is this project's directory, found once: a caller may cd.
project_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# cache_root prints the cache root of every built binary (test/controlplane's
# CacheRoot is the same rule).
cache_root() {
	echo "${SERVICEGROUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup}"
}

# build_once LOCK DIR: one build at a time (CI starts a build script in the
# background while it checks the code, and `make test` runs it again, which
# then waits here for that build instead of starting a second one). Exits
# printing DIR when the caller's have_all finds everything built by then;
# else sets work to a temporary directory removed on exit and exports the
# Go settings of every build here.
build_once() {
	exec 9>"$1"
	flock 9
	if have_all; then
		echo "$2"
		exit 0
	fi
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local GOGC="$(build_gogc)"
}

# build_gogc prints the Go collector's target for the compiler and linker
# of every build here: $GOGC when set, else 400. The compiler collects
# often at the runtime's 100 on the large packages of Kubernetes' tree;
# at 400 building the project's commands from an empty cache took 15% less
# CPU (372 CPU-seconds, 439 at 100), for some hundred MB more per compile.
build_gogc() {
	echo "${GOGC:-400}"
}

# pinned KEY prints a release pinned in test/controlplane/versions.env.
pinned() {
	sed -n "s/^$1=//p" "$(dirname "${BASH_SOURCE[0]}")/../../test/controlplane/versions.env"
}
#
# k8s_module DIR VERSION makes DIR a throwaway Go module that requires
# k8s.io/kubernetes@VERSION and can build its commands: k8s.io/kubernetes
# requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0
# and replaces them with ./staging paths, which a consumer does not inherit,
# so each one is pinned here to its published v0.X.Y. The module stays out of
# the project's go.mod (its replace block would leak into every build).
k8s_module() {
	local dir=$1 version=$2 json k8s_mod staging
	mkdir -p "$dir"
	(
		cd "$dir" || exit
		go mod init servicegroup.local/k8s >/dev/null 2>&1
		if ! json=$(go mod download -json "k8s.io/kubernetes@$version"); then
			echo "$json" >&2 # its "Error" says why (e.g. not in sum.golang.org)
			exit 1
		fi
		k8s_mod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$json")
		staging=${version/v1./v0.}
		{
			echo "require k8s.io/kubernetes $version"
			echo "replace ("
			# k8s.io/sample-* answer 403 on the proxy and nothing requires them.
			sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$k8s_mod" |
				grep -v '^k8s.io/sample-' |
				while read -r m; do echo "	$m => $m $staging"; done
			echo ")"
		} >>go.mod
	)
}

# k8s_share_project_versions DIR VERSION raises, in the module DIR that
# k8s_module made for VERSION, each module this project compiles to the
# version the project's go.mod selects (the release's own stays where it is
# newer): Go's build cache shares a compiled package only when its module
# version, and every dependency's, are the same. At the release's own
# versions `make build` and the race-free go test shared 185 of the 1,018
# packages they compile with this build (the newer grpc, protobuf, x/net
# and otel of this project's go.mod sit under nearly all of them); raised,
# they share all but a few. The binaries run Kubernetes' code of VERSION;
# `go version -m` lists the dependency versions each was built with.
k8s_share_project_versions() {
	local dir=$1 staging=${2/v1./v0.} root replaced
	root=$project_root
	replaced=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => .*#\1#p' "$dir/go.mod" | tr '\n' ' ')
	{
		echo "require ("
		# A staging module (replaced by k8s_module with the release's own
		# whatever is required) only at the release's version.
		project_module_versions |
			awk -v replaced=" $replaced" -v staging="$staging" 'index(replaced, " " $1 " ") && $2 != staging { next } { print "\t" $1 " " $2 }'
		echo ")"
	} >>"$dir/go.mod"
	# Their checksums, as this project verified them.
	cat "$root/go.sum" >>"$dir/go.sum"
}

# project_module_versions prints each module this project compiles (its
# packages and their tests) and the version it compiles, sorted.
project_module_versions() {
	(cd "$project_root" &&
		GOFLAGS= go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./...) |
		sort -u
}

# k8s_build DIR OUT LDFLAGS PKG... builds the k8s.io/kubernetes commands PKG
# (import paths) inside the module DIR made by k8s_module, into OUT (a
# directory, with a trailing slash, or a file for a single package).
k8s_build() {
	local dir=$1 out=$2 ldflags=$3 p
	shift 3
	(
		cd "$dir" || exit
		# A tools file makes `go mod tidy` resolve every package's imports.
		printf '//go:build tools\n\npackage tools\n' >tools.go
		for p in "$@"; do echo "import _ \"$p\"" >>tools.go; done
		go mod tidy -e >&2 || true
		go build -tags tools -trimpath -ldflags "$ldflags" -o "$out" "$@"
	)
}

# k8s_build_release DIR OUT VERSION PKG... builds the k8s.io/kubernetes
# commands PKG of VERSION into OUT (as k8s_build), in a module made in DIR,
# with the release stamped in each binary. The dependencies the release
# shares with this project are at the project's versions
# (k8s_share_project_versions), so that they compile once on a fresh
# machine; should a newer one not build with this release, DIR is made
# again and the release is built with its own. K8S_DEPS=own builds it with
# its own at once, for a release known not to build with the project's:
# the attempt compiles much of the release before it fails.
k8s_build_release() {
	local dir=$1 out=$2 version=$3 ldflags
	shift 3
	# The release goes into each binary's version (a kubelet reports it in
	# its Node status, kube-proxy in its log, --version and build_info).
	ldflags="-s -w $(k8s_version_ldflags "$version")"
	k8s_module "$dir" "$version"
	if [ "${K8S_DEPS:-project}" = own ]; then
		k8s_build "$dir" "$out" "$ldflags" "$@"
		return
	fi
	k8s_share_project_versions "$dir" "$version"
	if ! k8s_build "$dir" "$out" "$ldflags" "$@"; then
		echo ">> $version did not build with this project's dependency versions: building it with its own" >&2
		rm -rf "$dir"
		k8s_module "$dir" "$version"
		k8s_build "$dir" "$out" "$ldflags" "$@"
	fi
}

# k8s_version_ldflags VERSION prints the -X flags that stamp a Kubernetes
# release into a binary, as the release build does (otherwise it reports
# v0.0.0-master).
k8s_version_ldflags() {
	local version=$1 major minor pkg=k8s.io/component-base/version
	major=${version#v}
	major=${major%%.*}
	minor=${version#v*.}
	minor=${minor%%.*}
	echo "-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
}
