#!/usr/bin/env bash
# Fuzzes the parsers of what reaches our components from the network or
# from files and objects others write, each for a fixed number of new
# inputs: `make test` runs it beside the tests, at the lowest priority, so a
# crash the seed corpus does not hit still has a chance on every run.
# `make fuzz` runs every target longer.
#
# The counts are about what each target ran in 5 seconds on a quiet 2-core
# machine. A count, unlike a time, does the same work however loaded the
# machine is, so the smoke can use the tests' idle moments without
# fuzzing less. FUZZ_SMOKE_TIME (a -fuzztime: 5s, 1000x) replaces every
# count.
#
# go test -fuzz instruments every package of the test binary, its
# dependencies and its other test files' too, and caches them apart from
# the tests' builds: each target lives in a small package of its own
# parser (wrapper/internal/requestcheck, not wrapper), so that on a fresh
# machine the smoke compiles a few hundred packages, not the wrapper's and
# gridhosts' thousand (about 11 CPU-minutes when the targets were there).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(
	"./wrapper/internal/requestcheck/ FuzzHostAllowed 1000x"
	"./wrapper/internal/requestcheck/ FuzzPathError 6000x"
	"./wrapper/internal/localendpoint/ FuzzParseLocalEndpoint 3000x"
	"./wrapper/internal/proctcp/ FuzzParseSocketLine 1000x"
	"./wrapper/sitestream/siteid/ FuzzParseLeaderIdentity 14000x"
	"./wrapper/sitestream/siteid/ FuzzSiteView 4000x"
	"./wrapper/sitestream/siteid/ FuzzSiteLeaseName 9000x"
	"./wrapper/snapshot/ FuzzSnapshotDecode 1000x"
	"./autonomy/webhook/review/ FuzzReadReview 1500x"
	"./trafficmode/ FuzzParse 95000x"
	"./plugin/gridhosts/config/ FuzzParse 2000x"
	"./plugin/gridhosts/snapshot/ FuzzDecodeSnapshot 25000x"
)
# deadline_race: the output of a run that failed only because Go's fuzzing
# coordinator reported its own -fuzztime deadline as a failure (a race fixed
# in Go 1.27, golang/go#75804): "context deadline exceeded" and no failing
# input written. Such a run is tried once more; anything else fails at once.
deadline_race() {
	grep -q 'context deadline exceeded' <<<"$1" && ! grep -q 'Failing input written' <<<"$1"
}
status=0
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg name count <<<"$t"
	time=${FUZZ_SMOKE_TIME:-$count}
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
		echo ">> $pkg $name ($time): $(grep -o 'execs: [0-9]*' <<<"$out" | tail -n 1)"
	else
		echo "$out"
		echo ">> $pkg $name failed (its failing input is under $pkg/testdata/fuzz/$name)"
		status=1
	fi
done
echo ">> the fuzz smoke took $((SECONDS - start))s"
exit $status
