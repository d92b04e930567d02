#!/usr/bin/env bash
# Builds every older-release binary the tests run: the kube-apiservers of
# hack/apiserver-versions.txt and the kube-proxies of
# hack/kube-proxy-versions.txt, one `go build` per release for both (see
# hack/lib/older-release-bins.sh). .ci/run and `make test` start it in the
# background at a low priority; it prints each binary's directory.
#
#   SERVICEGROUP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/servicegroup)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/lib/k8s-module.sh
. "$here/lib/k8s-module.sh"
# shellcheck source=hack/lib/older-release-bins.sh
. "$here/lib/older-release-bins.sh"

for pair in "${OLDER_RELEASE_LISTS[@]}"; do
	older_release_bins "${pair%%:*}" "${pair#*:}"
done
