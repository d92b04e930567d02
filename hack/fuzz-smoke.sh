#!/usr/bin/env bash
# Fuzzes, for a short fixed time each (FUZZ_SMOKE_TIME, default 5s), the
# parsers of what reaches our components from the network or from files
# and objects others write: `make test` runs it after the tests, so a
# crash the seed corpus does not hit still has a chance on every run.
# `make fuzz` runs every target longer.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${FUZZ_SMOKE_TIME:-5s}
targets=(
	"./wrapper/ FuzzHostAllowed"
	"./wrapper/ FuzzPathError"
	"./wrapper/ FuzzParseLocalEndpoint"
	"./wrapper/ FuzzParseSocketLine"
	"./wrapper/sitestream/ FuzzParseLeaderIdentity"
	"./wrapper/sitestream/ FuzzSiteView"
	"./wrapper/sitestream/ FuzzSiteLeaseName"
	"./wrapper/snapshot/ FuzzSnapshotDecode"
	"./autonomy/webhook/ FuzzReadReview"
	"./trafficmode/ FuzzParse"
	"./plugin/gridhosts/ FuzzParse"
	"./plugin/gridhosts/snapshot/ FuzzDecodeSnapshot"
)
status=0
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg" 2>&1); then
		echo "$out"
		echo ">> $pkg $name failed (its failing input is under $pkg/testdata/fuzz/$name)"
		status=1
	else
		echo ">> $pkg $name: $(grep -o 'execs: [0-9]*' <<<"$out" | tail -n 1)"
	fi
done
exit $status
