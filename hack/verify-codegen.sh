#!/usr/bin/env bash
# Fails when a generated file differs from what `make generate` would write:
# regenerates in a scratch copy of the tree and compares.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GENERATED=(apis client build/crds build/chart)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cd "$REPO_ROOT"
git ls-files -co --exclude-standard -z | xargs -0 tar -cf - | tar -xf - -C "$scratch"
"$scratch/hack/update-codegen.sh" >/dev/null

status=0
for d in "${GENERATED[@]}"; do
	if ! diff -ruN "$REPO_ROOT/$d" "$scratch/$d"; then
		status=1
	fi
done
if [ $status -ne 0 ]; then
	echo "generated files are stale: run 'make generate'" >&2
	exit 1
fi
echo "generated files are up to date"
