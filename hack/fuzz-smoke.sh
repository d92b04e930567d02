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
# deadline_race: the output of a run that failed only because Go's fuzzing
# coordinator reported its own -fuzztime deadline as a failure (a race fixed
# in Go 1.27, golang/go#75804): "context deadline exceeded" and no failing
# input written. Such a run is tried once more; anything else fails at once.
deadline_race() {
	grep -q 'context deadline exceeded' <<<"$1" && ! grep -q 'Failing input written' <<<"$1"
}
status=0
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	fuzz() { go test -run '^$' -fuzz "^${name}\$" -fuzztime "$time" "$pkg" 2>&1; }
	ok=1
	if ! out=$(fuzz); then
		ok=0
		if deadline_race "$out"; then
			echo ">> $pkg $name: Go's fuzzing coordinator reported its own deadline (golang/go#75804), no failing input: once more"
			out=$(fuzz) && ok=1
		fi
	fi
	if [ "$ok" = 1 ]; then
		echo ">> $pkg $name: $(grep -o 'execs: [0-9]*' <<<"$out" | tail -n 1)"
	else
		echo "$out"
		echo ">> $pkg $name failed (its failing input is under $pkg/testdata/fuzz/$name)"
		status=1
	fi
done
exit $status
