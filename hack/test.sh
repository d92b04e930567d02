#!/usr/bin/env bash
# Runs every test as `make test` does and says where the time went.
#
# The older kube-apiserver and kube-proxy releases (hack/older-release-bins.sh)
# and the monitoring tools (hack/monitoring-tools.sh) build in the
# background at a low priority while the other packages run; the tests that
# need them wait for them. The run's events go to
# $TEST_OUT/test.json (go test -json). Each package's test binary runs under
# hack/cpuacct (go test -exec), which appends the user+sys CPU time of the
# binary and of every process it ran to $TEST_OUT/cpu.jsonl. Afterwards the
# slowest tests, the slowest packages with their CPU-minutes, and the
# CPU-minutes of the whole run (compiling and the background builds
# included) are printed: wall time moves with the machine's load, CPU time
# hardly does, so a regression in the suite's cost shows in CI output.
#
# After the tests, hack/fuzz-smoke.sh fuzzes the network-facing parsers for
# a few seconds each.
#
#   TEST_FLAGS  go test flags (default: -race -count=1 -timeout 30m)
#   TEST_P      packages run at once (go test -p; default 3, a TEST_FLAGS -p wins)
#   TEST_PKGS   packages (default: ./..., the longest-running first)
#   TEST_OUT    where the logs go (default: bin/test)
set -euo pipefail
cd "$(dirname "$0")/.."
TEST_FLAGS=${TEST_FLAGS:--race -count=1 -timeout 30m}
# go test starts packages in the order given (with -p of them at a time):
# the longest first, so none of them starts last and sets the run's end
# alone. The list is the slowest packages of a recent run; ./... adds the
# rest (each package runs once). TestRealNodes alone takes longer than the
# rest of the packages: it starts at once and holds one of the TEST_P slots
# throughout, mostly waiting on its cluster (about 0.7 of a core), so with
# go test's default of GOMAXPROCS (2 here) every other package would run
# one at a time beside it; with 3, two at a time.
TEST_P=${TEST_P:-3}
TEST_PKGS=${TEST_PKGS:-./test/realnode/ ./internal/imagebuild/ ./wrapper/ ./internal/release/ ./test/e2e/ ./controller/ ./plugin/gridhosts/ ./test/superedge/ ./test/integration/ ./...}
TEST_OUT=${TEST_OUT:-bin/test}
mkdir -p "$TEST_OUT"
out=$(cd "$TEST_OUT" && pwd)
json="$out/test.json"
records="$out/cpu.jsonl"
gotestsum=(go tool -modfile=hack/tools/go.mod gotestsum)
start=$SECONDS

echo ">> older kube-apiserver and kube-proxy releases, monitoring tools: building in the background (logs: $TEST_OUT)"
nice -n 10 hack/older-release-bins.sh >"$out/older-release-bins.log" 2>&1 &
older_bins=$!
nice -n 10 hack/monitoring-tools.sh >"$out/monitoring-tools.log" 2>&1 &
monitoring=$!
trap 'kill "$older_bins" "$monitoring" 2>/dev/null || true' EXIT

# The settings of `make build`, so its compiled standard library serves.
CGO_ENABLED=0 go build -trimpath -o "$out/cpuacct" ./hack/cpuacct
rm -f "$records"

status=0
# shellcheck disable=SC2086 # word splitting of the flag and package lists is wanted
"${gotestsum[@]}" --format pkgname-and-test-fails --jsonfile "$json" -- -p "$TEST_P" $TEST_FLAGS \
	-exec "'$out/cpuacct' exec --records '$records'" $TEST_PKGS || status=$?

echo
echo ">> fuzzing the network-facing parsers (hack/fuzz-smoke.sh)"
hack/fuzz-smoke.sh || status=1

for job in "older-release-bins:$older_bins" "monitoring-tools:$monitoring"; do
	if ! wait "${job#*:}"; then
		echo "hack/${job%%:*}.sh failed:"
		cat "$out/${job%%:*}.log"
		status=1
	fi
done
trap - EXIT
grep -h '^>> .* \(built\|ready\) in' "$out/older-release-bins.log" "$out/monitoring-tools.log" || true

echo
echo ">> slowest tests"
"${gotestsum[@]}" tool slowest --jsonfile "$json" --threshold 15s | head -n 20
echo
"$out/cpuacct" report --records "$records" --events "$json" --whole || status=1
echo
echo ">> make test took $((SECONDS - start))s after the binaries were built"
# The plain closing line, counting tests and subtests as gotestsum's DONE line does.
count() { grep -c "\"Action\":\"$1\".*\"Test\":" "$json" || true; }
echo "tests: $(count pass) passed, $(count fail) failed, $(count skip) skipped"
exit $status
