#!/usr/bin/env bash
# Installs the Debian packages listed in hack/host-packages.txt (or in the
# lists given as arguments, e.g. hack/bench-packages.txt) that are missing
# (as root, with apt-get), or names them in one line when it cannot. Used by
# `make test`, `make demo`, `make bench` and .ci/run. Without them the
# end-to-end tests skip, or fail under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- hack/host-packages.txt

missing=()
for list in "$@"; do
	while read -r cmd pkg _; do
		case "$cmd" in ''|'#'*) continue ;; esac
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
	done <"$list"
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo ">> installing Debian packages: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	exit 0
fi
echo "host-deps: missing Debian packages: ${missing[*]} (as root: apt-get install -y ${missing[*]}); the end-to-end tests skip without them, or fail under CI=true"
[ -z "${CI:-}" ]
