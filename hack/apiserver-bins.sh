#!/usr/bin/env bash
# Builds the older kube-apiservers the controller and the wrapper are tested
# against: kube-apiserver for each release in hack/apiserver-versions.txt
# (or the releases given as arguments), cached per (release, Go version) in
#
#   $SERVICEGROUP_CACHE/kube-apiserver-<release>-<go version>/bin/kube-apiserver
#
# One `go build` per release makes the kube-proxy of that release too when
# its list names it (hack/lib/older-release-bins.sh). With --print-dir it
# only prints the cache directory of each release and builds nothing.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/lib/k8s-module.sh
. "$here/lib/k8s-module.sh"
# shellcheck source=hack/lib/older-release-bins.sh
. "$here/lib/older-release-bins.sh"

older_release_bins kube-apiserver apiserver "$@"
