#!/usr/bin/env bash
# Builds the release tools (hack/release-versions.env) from the Go module
# proxy, each into its own cache directory keyed on (tool version, Go
# version), the way hack/monitoring-tools.sh builds promtool:
#
#   $SERVICEGROUP_CACHE/helm-<version>-<go version>/helm
#   $SERVICEGROUP_CACHE/cosign-<version>-<go version>/cosign
#   $SERVICEGROUP_CACHE/krew-<version>-<go version>/krew
#
# helm and cosign build in the tools module that promtool and Prometheus
# share, at this project's dependency versions (hack/lib/tools-module.sh);
# krew, which requires client-go v11, in a module of its own.
#
# A tool already cached is not rebuilt. Prints the three directories, one a
# line (helm, cosign, krew); with --print-dir it only prints them. With tool
# names as arguments (helm cosign krew) it builds and prints only those.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
# shellcheck source=hack/lib/k8s-module.sh
. "$(dirname "$0")/lib/k8s-module.sh"
# shellcheck source=hack/lib/tools-module.sh
. "$(dirname "$0")/lib/tools-module.sh"

versions="$(dirname "$0")/release-versions.env"
print_only=false
if [ "${1:-}" = "--print-dir" ]; then
	print_only=true
	shift
fi
[ $# -gt 0 ] || set -- helm cosign krew
go_version=$(go env GOVERSION)
# The tools module, made once for helm and cosign: resolving it (go get)
# took some 25 s a time.
tools_dir=$(mktemp -d)
trap 'rm -rf "$tools_dir"' EXIT

# tool_spec TOOL sets module, version, pkg and ldflags (the version the tool
# reports, as its own release build stamps it).
tool_spec() {
	case $1 in
	helm)
		version=$(sed -n 's/^HELM=//p' "$versions")
		module=helm.sh/helm/${version%%.*}
		pkg=$module/cmd/helm
		ldflags="-X $module/internal/version.version=$version"
		;;
	cosign)
		version=$(sed -n 's/^COSIGN=//p' "$versions")
		module=github.com/sigstore/cosign/${version%%.*}
		pkg=$module/cmd/cosign
		ldflags="-X sigs.k8s.io/release-utils/version.gitVersion=$version"
		;;
	krew)
		version=$(sed -n 's/^KREW=//p' "$versions")
		module=sigs.k8s.io/krew
		pkg=$module/cmd/krew
		ldflags="-X sigs.k8s.io/krew/internal/version.gitTag=$version"
		;;
	*)
		echo "release-tools.sh: unknown tool $1 (known: helm cosign krew)" >&2
		exit 2
		;;
	esac
	dir="$(cache_root)/$1-$version-$go_version"
}

for tool in "$@"; do
	tool_spec "$tool"
	if $print_only || [ -x "$dir/$tool" ]; then
		echo "$dir"
		continue
	fi
	mkdir -p "$dir"
	(
		have_all() { [ -x "$dir/$tool" ]; }
		build_once "$dir.lock" "$dir" >/dev/null
		start=$SECONDS
		echo ">> building $tool $version from the Go module proxy (once; cached in $dir)" >&2
		if [ "$tool" = krew ]; then
			cd "$work"
			go mod init "servicegroup.local/$tool" >/dev/null 2>&1
			go get "$pkg@$version" >&2
		else
			[ -f "$tools_dir/go.mod" ] || tools_module "$tools_dir"
			cd "$tools_dir"
			tools_build_lock
		fi
		if [ "$tool" = helm ]; then
			# The Kubernetes release helm assumes without a cluster (helm
			# template, lint): its client-go's, as helm's own Makefile sets it
			# (else 1.20, below the chart's kubeVersion).
			k8s=$(go list -m -f '{{.Version}}' k8s.io/client-go)
			k8s=${k8s#v0.}
			for p in pkg/lint/rules pkg/chartutil; do
				ldflags+=" -X $module/$p.k8sVersionMajor=1 -X $module/$p.k8sVersionMinor=${k8s%%.*}"
			done
		fi
		go build -trimpath -ldflags "-s -w $ldflags" -o "$dir/$tool.tmp" "$pkg"
		mv "$dir/$tool.tmp" "$dir/$tool"
		echo ">> $tool $version built in $((SECONDS - start))s, $(du -h "$dir/$tool" | cut -f1)" >&2
	)
	echo "$dir"
done
