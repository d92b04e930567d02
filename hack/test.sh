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
# Beside the tests, at the lowest priority, hack/fuzz-smoke.sh fuzzes the
# network-facing parsers, a few thousand inputs each.
#
# The packages of NORACE_PKGS run in a `go test` of their own, beside the
# others and without -race: their test binaries mostly drive real builds,
# compression and hashing, and start no goroutines of ours that share
# memory (an HTTP server at most), so the race runtime found nothing there
# and made them 3-4 times costlier: test/realnode (the product's binaries,
# images, kubectl, helm; 77 CPU-seconds of a run), internal/release (its
# test 110 CPU-seconds with -race, 27 without) and internal/imagebuild
# (72 and 24). Their output follows the others'; their events and CPU time
# join theirs in the reports. They build with CGO_ENABLED=0, as `make build`
# and the images do: cgo changes package net's build and so the cache key of
# every package above it, and with cgo these three test binaries compiled
# their whole dependency tree once more on a fresh machine (269 CPU-seconds,
# 73 without); none of them uses cgo.
#
#   TEST_FLAGS   go test flags (default: -race -trimpath -count=1 -timeout 60m
#                -ldflags=-w; -race dropped for NORACE_PKGS)
#   TEST_P       packages run at once: the others' go test runs TEST_P-1
#                (default 3, so 2), the race-free one 2 (test/realnode, and the
#                short ones one after another beside it); a TEST_FLAGS -p wins
#   TEST_PKGS    packages (default: ./..., the longest-running first)
#   NORACE_PKGS  those of them run without -race (default: test/realnode,
#                internal/release, internal/imagebuild)
#   NORACE_TESTS tests of packages that run with -race, run without it in a
#                go test of their own, as PKG:REGEXP (go test -run) separated
#                by spaces: load tests that skip under -race
#                (testenv.WithoutRace), started with the side lane (default:
#                wrapper's TestFanOutAndStalledWatcher; empty: none)
#   TEST_PARALLEL  tests of one package run at once (go test -parallel) in
#                the go tests with -race (default 4; go test's default is
#                GOMAXPROCS, 2 here); a TEST_FLAGS -parallel wins
#   NORACE_AFTER  "speed" (the default): side by side on a machine whose cores
#                do the work of `cpuacct speed` within SIDE_BY_SIDE_MS
#                CPU-milliseconds (default 800), else apart; "others": the
#                race-free go test starts once the go test with -race has
#                ended; a package (./wrapper/): once that package has ended
#                in the go test with -race (or that go test has); empty: both
#                from the start, side by side
#   OTHERS_NICE  the niceness of the go test with -race (default 10, below the
#                race-free one's, whose test/realnode counts every DNS query
#                its real nodes' clients lose)
#   SIDE_AFTER   the packages of SIDE_PKGS, then those ./... adds beyond the
#                ones TEST_PKGS names (short ones; their linking set the last
#                minute of a run), run SIDE_P at a time in a third go test,
#                with -race at OTHERS_NICE, once this named package has ended
#                (default ./test/e2e/; empty: they run last in the race go
#                test, in TEST_PKGS' order)
#   SIDE_PKGS    packages TEST_PKGS names that run first in the side lane
#                (default: autonomy/webhook, cmd/application-grid-controller,
#                internal/gridcli, cmd/application-grid-wrapper,
#                internal/nodelabels: the longest of the side lane, mostly
#                waiting on timers and their control planes)
#   SIDE_P       packages the side lane runs at once (default 2)
#   TEST_OUT     where the logs go (default: bin/test)
#   GOGC         the Go collector's target for the tests and every process they
#                start (default here 400, the runtime's 100)
#   GORACE       the race runtime's options (default here atexit_sleep_ms=0,
#                the runtime's 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
# The test binaries and the processes they start (apiservers, etcd, our
# binaries, the real nodes' kubelets and containerd) live seconds to
# minutes with small live heaps, where the default GOGC=100 spends a large
# share of their CPU collecting. Measured on the quiet machine, one after
# the other: test/integration's binary and processes 97.4 CPU-seconds at
# 100, 84.1 at 400 (0.86x); four apiserver starts 7.7 and 6.1; an
# apiserver's peak RSS 281 and 386 MB. No test reads a heap size that
# GOGC sets: the memory checks collect first or count allocations.
export GOGC=${GOGC:-400}
# A test binary built with -race sleeps a second before it exits (the race
# runtime's atexit_sleep_ms, default 1000, for goroutines still racing at
# exit): a second of wall time for each of some sixty packages, most of
# them short ones run one after the other at the end of the run, where they
# set its length. Without the sleep a race at exit can go unreported; every
# race while the tests run is still reported. A GORACE already set is kept.
export GORACE=${GORACE:-atexit_sleep_ms=0}
# -trimpath keeps the checkout's directory out of the build cache's keys:
# a fresh clone of the same code (CI's) reuses the last one's compiled
# packages instead of compiling every package of ours again under -race.
# -ldflags=-w links each test binary without DWARF: every run links some
# seventy of them (the build cache keeps no linked test binary), the last
# ones one after the other at the end of the run, and no debugger reads
# them (tracebacks and race reports use the runtime's own tables). Linking
# internal/gridcli's with -race: 7.3 CPU-seconds and 6.4 s with DWARF, 4.4
# and 3.8 without.
# -timeout 60m: a package's binary waits, inside its time, for the builds
# in the background it needs (the older releases, the monitoring tools,
# SuperEdge's components) while they share the CPU with every compile. From
# empty caches test/realnode ran 1,793 s at 13a9d64; at 47246df, on a
# machine that compiled at about half the speed, test/realnode, wrapper
# (TestListWatchOnEachAPIServer) and test/e2e (TestKubeProxyVersions) ran
# out of 30 minutes waiting. Warm, the longest takes 14 minutes.
TEST_FLAGS=${TEST_FLAGS:--race -trimpath -count=1 -timeout 60m -ldflags=-w}
# go test starts packages in the order given (with -p of them at a time):
# the longest first, so none of them starts last and sets the run's end
# alone. The list is the slowest packages of a recent run; ./... adds the
# rest (each package runs once), in the order of their paths: left there,
# internal/gridcli (80 s) and internal/nodelabels (55 s) started some 880 s
# into a run of 1,000 and set its end beside some forty short packages.
# TestRealNodes alone takes about as long as all the other packages: it
# runs in its own go test (NORACE_AFTER: once the others have ended), while
# the other packages run TEST_P-1 at a time (2 by default; one at a time
# would leave a core idle while they wait on their apiservers).
TEST_P=${TEST_P:-3}
TEST_PKGS=${TEST_PKGS:-./test/realnode/ ./internal/imagebuild/ ./wrapper/ ./internal/release/ ./test/e2e/ ./controller/ ./plugin/gridhosts/ ./test/superedge/ ./test/integration/ ./autonomy/webhook/ ./internal/gridcli/ ./cmd/application-grid-wrapper/ ./internal/nodelabels/ ./...}
NORACE_PKGS=${NORACE_PKGS:-./test/realnode/ ./internal/imagebuild/ ./internal/release/}
# A load test of a race package whose cost the race runtime multiplies,
# where smaller tests under -race cover the races it could find, runs
# without -race: TestFanOutAndStalledWatcher took 96 CPU-seconds alone with
# -race and 17 without (57 and 16 s wall, on the slow kind). Its package's
# race binary skips it (testenv.WithoutRace; internal/testenv's
# TestWithoutRaceTestsRunInMakeTest holds this default to those tests).
NORACE_TESTS=${NORACE_TESTS-'./wrapper/:^TestFanOutAndStalledWatcher$'}
# Most tests marked parallel start their own control plane and then wait
# on it (watches, informers, kube-controller-manager's timers): in a run,
# controller's parallel tests took 344 s between them, plugin/gridhosts'
# 273 s, test/integration's 163 s, using a fraction of a core each. Two at
# a time (GOMAXPROCS on this machine) left the race go test's packages a
# sum of about 1,700 s for its two slots, the run's end.
TEST_PARALLEL=${TEST_PARALLEL:-4}
# A thread at 5 weighs a third of one at 0, one at 10 a ninth, and the
# race go test runs many more threads than test/realnode's own processes
# (its control plane, kubelets, containerd). Its nodes' pods are in
# cgroups of their own, which nice does not reach (test/realnode weighs
# them). test/realnode mostly waits on its cluster; the race tests take
# what it leaves, and their waits are bounded for a loaded machine
# (testwait.Floor).
# One lane after the other on a slow machine: on the 2-core machine CI
# ran on on 2026-12-02, whose cores do about a quarter of the work of the
# one the lanes were set side by side on (a warm run: 87 CPU-minutes, 21
# before), the two lanes side
# by side kept both cores busy for the whole run, and the tests with -race
# waited seconds to minutes for the CPU behind test/realnode (1.2 cores on
# average, its pods out of nice's reach). In the CI of 3f30e53 an e2e
# cluster took 3m41s to come up, a restarted kube-apiserver was still
# registering its APIs after 3 minutes, and five tests missed their
# bounds, test/realnode's among them. Apart (a .ci/run of 71210a0 on the
# same machine), the whole run took 47m35s and 77.3 CPU-minutes against
# 48m15s and 89.8, test/e2e 469 s of wall (1,368 s beside), wrapper 693 s
# (1,863 s), test/realnode 1,210 s (1,598 s), and only one test failed
# (since mended), none of the five.
# Side by side on a quick one: there its cores keep up with both lanes,
# and apart the race-free go test only adds its length to the run's end
# (a .ci/run of 4cc88c8 from empty caches: test/realnode, 730 s, started
# 1,755 s into the tests, after the race go test). NORACE_AFTER=speed lets
# the machine's speed decide (see below, after cpuacct is built), and is
# the default. TestRealNodes has lost a Service request in a node's
# kube-proxy handover side by side (1 of 2 warm runs on the quick machine
# on 2026-12-03) and apart (a slow machine's run beside the background
# builds, the same day): apart does not avoid it. Since its report says
# where such a request went (8552837), 54 handovers lost none
# (SERVICEGROUP_REALNODE_HANDOVERS; 40 of them beside the background
# builds or the race tests at nice 0, heavier than either lane layout).
NORACE_AFTER=${NORACE_AFTER-speed}
SIDE_BY_SIDE_MS=${SIDE_BY_SIDE_MS:-800}
OTHERS_NICE=${OTHERS_NICE:-10}
# The side lane: in a warm run of 1364178 (911 s), the two slots of the race
# go test held 1,740 s of packages between them, and ended at 906 s; the
# side lane, started after controller (559 s), ran its 210 s of tests one
# package at a time, linking each first, to 900 s; and the machine's cores
# were 86% busy on average, 49-65% in minutes 5-6 and 23-54% in the last two.
# Four of SIDE_PKGS' packages held 218 s of the race go test's slots for
# some 70 CPU-seconds (timers and waits); the fifth,
# cmd/application-grid-controller (54 s), was in the side lane at its
# path's place, near the end. At the head of the side lane, started after
# test/e2e (some 390 s in) and two at a time, they fill those idle minutes:
# 890 s, then 855 s and 890 s in two .ci/run, the cores busy but for a
# minute (docs/benchmarks/ci-runs.md).
SIDE_AFTER=${SIDE_AFTER-./test/e2e/}
SIDE_PKGS=${SIDE_PKGS-./autonomy/webhook/ ./cmd/application-grid-controller/ ./internal/gridcli/ ./cmd/application-grid-wrapper/ ./internal/nodelabels/}
SIDE_P=${SIDE_P:-2}
TEST_OUT=${TEST_OUT:-bin/test}
mkdir -p "$TEST_OUT"
out=$(cd "$TEST_OUT" && pwd)
json="$out/test.json"
records="$out/cpu.jsonl"
# test/controlplane's harnesses append each real component they stop here
# (internal/cpuacct.RecordComponent): which programs the CPU went to.
export CPUACCT_COMPONENTS="$out/components.jsonl"
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
CGO_ENABLED=0 go build -trimpath -o "$out/testfailures" ./hack/testfailures
# The race lanes run their packages' test binaries through hack/testrun,
# which keeps them per machine and links one again only when what it is
# built from changed (go test links every one on every run: some 100
# CPU-seconds of race linking, a minute of the two cores, at 2 GB of disk).
CGO_ENABLED=0 go build -trimpath -o "$out/testrun" ./hack/testrun
# shellcheck source=hack/lib/k8s-module.sh
. hack/lib/k8s-module.sh
test_binaries="$(cache_root)/test-binaries"
# The last run's events too: the lanes that wait for a package read
# test-others.json from their start, before its go test has rewritten it.
rm -f "$records" "$CPUACCT_COMPONENTS" "$json" "$out"/test-*.json

# shellcheck source=hack/lib/hugepages.sh
. hack/lib/hugepages.sh
# .ci/run turns them on for its run; make test only says how they stand
# (the speed below is measured without them either way).
echo ">> transparent huge pages: $(hugepages_mode)"

# NORACE_AFTER=speed: the lanes apart or side by side, by how much a core
# of this machine does: the CPU time of a fixed piece of work (cpuacct
# speed), which load moves less than wall time. The quicker 2-core machine did it in 492 ms quiet
# and 583-711 ms at a load of 8 (a warm make test run beside it); the slow
# one's builds took 2.2-2.8 times the CPU of the same builds there, their
# user time alone 1.9 times (hack/k8s-bins.sh 1,926 and 870 CPU-seconds,
# 1,414 and 741 user; the older releases 2,324 and 845). A quick machine
# taken for a slow one runs the lanes apart, which costs time, not a
# failure; hence a threshold nearer the quick machine's figure. The work
# runs without huge pages whatever .ci/run set: with them the slow kind
# read 391-449 ms, ran the lanes side by side at a load of 30-45, and a
# test that times a kube-controller-manager missed its bounds
# (docs/benchmarks/ci-runs.md).
if [ "$NORACE_AFTER" = speed ]; then
	speed_ms=$("$out/cpuacct" speed)
	if [ "$speed_ms" -le "$SIDE_BY_SIDE_MS" ]; then
		NORACE_AFTER=
		echo ">> this machine did cpuacct's fixed work in $speed_ms CPU-ms (at most SIDE_BY_SIDE_MS=$SIDE_BY_SIDE_MS): the race-free go test runs beside the race one"
	else
		NORACE_AFTER=others
		echo ">> this machine did cpuacct's fixed work in $speed_ms CPU-ms (more than SIDE_BY_SIDE_MS=$SIDE_BY_SIDE_MS): the race-free go test starts once the race one has ended"
	fi
fi

# The packages, in the order given; those without -race apart.
# shellcheck disable=SC2086 # word splitting of the package list is wanted
norace_pkgs=" $(go list $NORACE_PKGS | tr '\n' ' ')"
# The packages TEST_PKGS names one by one (no "..."): the others go to the
# side lane when SIDE_AFTER is set, after those of SIDE_PKGS.
named=()
for p in $TEST_PKGS; do
	[[ $p == *...* ]] || named+=("$p")
done
named_pkgs=" $(go list "${named[@]}" 2>/dev/null | tr '\n' ' ')"
# shellcheck disable=SC2086 # word splitting of the package list is wanted
all_pkgs=$(go list $TEST_PKGS)
all_set=" $(tr '\n' ' ' <<<"$all_pkgs")"
side_first=" "
side=()
if [ -n "$SIDE_AFTER" ] && [ -n "$SIDE_PKGS" ]; then
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	for pkg in $(go list $SIDE_PKGS); do
		if [[ $all_set == *" $pkg "* ]] && [[ $norace_pkgs != *" $pkg "* ]]; then
			side_first+="$pkg "
			side+=("$pkg")
		fi
	done
fi
norace=()
others=()
for pkg in $all_pkgs; do
	if [[ $side_first == *" $pkg "* ]]; then
		continue
	elif [[ $norace_pkgs == *" $pkg "* ]]; then
		norace+=("$pkg")
	elif [ -n "$SIDE_AFTER" ] && [[ $named_pkgs != *" $pkg "* ]]; then
		side+=("$pkg")
	else
		others+=("$pkg")
	fi
done
norace_after_pkg=
case $NORACE_AFTER in
"" | others) ;;
*) norace_after_pkg=$(go list "$NORACE_AFTER") ;;
esac
norace_flags=()
for flag in $TEST_FLAGS; do
	[ "$flag" = -race ] || norace_flags+=("$flag")
done

# wait_for_race_lane [PKG] returns once the race go test has ended or,
# with PKG, once PKG has ended in it (its test2json record says so).
wait_for_race_lane() {
	while [ -n "$others_job" ] && kill -0 "$others_job" 2>/dev/null; do
		if [ -n "${1:-}" ] && grep -qE "\"Action\":\"(pass|fail|skip)\",\"Package\":\"$1\",\"Elapsed\"" "$out/test-others.json" 2>/dev/null; then
			return
		fi
		sleep 5
	done
}

status=0
norace_job=
others_p=$TEST_P
jsons=()
[ ${#norace[@]} -eq 0 ] || others_p=$((TEST_P > 1 ? TEST_P - 1 : 1))
others_job=
if [ ${#others[@]} -gt 0 ]; then
	jsons=("$out/test-others.json")
	# At nice 10 (their apiservers too), below the race-free go test and the
	# real nodes' components when NORACE_AFTER is empty and they run beside.
	# shellcheck disable=SC2086 # word splitting of the flag list is wanted
	nice -n "$OTHERS_NICE" "${gotestsum[@]}" --format pkgname-and-test-fails --jsonfile "$out/test-others.json" --raw-command -- \
		"$out/testrun" -cache "$test_binaries" -name race -p "$others_p" -exec "'$out/cpuacct' exec --records '$records'" \
		-- -parallel "$TEST_PARALLEL" $TEST_FLAGS -- "${others[@]}" &
	others_job=$!
fi
if [ ${#norace[@]} -gt 0 ]; then
	jsons+=("$out/test-norace.json")
	# Two at a time: the first (test/realnode, mostly waiting on its
	# cluster) and the short ones one after the other beside it; with
	# NORACE_AFTER set, once the race go test has ended (see above).
	# CGO_ENABLED=0 for go test only (gotestsum itself stays the build the
	# other go tests run).
	(
		case $NORACE_AFTER in
		"") ;;
		others)
			wait_for_race_lane
			echo ">> the race-free go test started $((SECONDS - start)) s into the run, after the race go test"
			;;
		*)
			wait_for_race_lane "$norace_after_pkg"
			echo ">> the race-free go test started $((SECONDS - start)) s into the run, after $norace_after_pkg (or the race go test) ended"
			;;
		esac
		exec "${gotestsum[@]}" --format pkgname-and-test-fails --jsonfile "$out/test-norace.json" --raw-command -- \
			env CGO_ENABLED=0 go test -json -p 2 "${norace_flags[@]}" \
			-exec "'$out/cpuacct' exec --records '$records'" "${norace[@]}"
	) >"$out/norace.log" 2>&1 &
	norace_job=$!
fi
trap 'kill "$older_bins" "$monitoring" $norace_job $others_job 2>/dev/null || true' EXIT
side_job=
if [ ${#side[@]} -gt 0 ]; then
	jsons+=("$out/test-side.json")
	# SIDE_PKGS' and the short packages, SIDE_P at a time in a lane of
	# their own, once SIDE_AFTER has ended in the race go test (or that go
	# test has): from then on the machine has CPU to spare, where at the
	# start the real-node test's install and the longest packages leave none
	# (a third lane from the start made test/realnode 100 s longer).
	after=$(go list "$SIDE_AFTER")
	(
		wait_for_race_lane "$after"
		echo ">> the side lane started $((SECONDS - start)) s into the run, after $after" >"$out/side.log"
		# shellcheck disable=SC2086 # word splitting of the flag list is wanted
		exec nice -n "$OTHERS_NICE" "${gotestsum[@]}" --format pkgname-and-test-fails --jsonfile "$out/test-side.json" --raw-command -- \
			"$out/testrun" -cache "$test_binaries" -name side -p "$SIDE_P" -exec "'$out/cpuacct' exec --records '$records'" \
			-- -parallel "$TEST_PARALLEL" $TEST_FLAGS -- "${side[@]}" >>"$out/side.log" 2>&1
	) &
	side_job=$!
fi
# NORACE_TESTS, one package after the other, from when the side lane
# starts (at once without one), at OTHERS_NICE: where the machine has CPU to
# spare, as for the side lane. Each package's race-free test binary is kept
# as the race lanes' are (testrun). Only the packages TEST_PKGS runs.
read -ra entries <<<"$NORACE_TESTS"
norace_tests=()
for entry in "${entries[@]}"; do
	if [[ $all_set == *" $(go list "${entry%%:*}") "* ]]; then
		norace_tests+=("$entry")
	fi
done
norace_tests_job=
if [ ${#norace_tests[@]} -gt 0 ]; then
	for i in "${!norace_tests[@]}"; do
		jsons+=("$out/test-norace-tests-$i.json")
	done
	(
		[ -z "$SIDE_AFTER" ] || wait_for_race_lane "$(go list "$SIDE_AFTER")"
		echo ">> NORACE_TESTS started $((SECONDS - start)) s into the run"
		tests_status=0
		for i in "${!norace_tests[@]}"; do
			entry=${norace_tests[$i]}
			nice -n "$OTHERS_NICE" "${gotestsum[@]}" --format pkgname-and-test-fails --jsonfile "$out/test-norace-tests-$i.json" --raw-command -- \
				env CGO_ENABLED=0 "$out/testrun" -cache "$test_binaries" -name norace-tests -p 1 -exec "'$out/cpuacct' exec --records '$records'" \
				-- -run "${entry#*:}" "${norace_flags[@]}" -- "$(go list "${entry%%:*}")" || tests_status=1
		done
		exit $tests_status
	) >"$out/norace-tests.log" 2>&1 &
	norace_tests_job=$!
fi
# The fuzz smoke runs beside the tests from the start, at the lowest
# priority: it takes what their waits leave idle (a fixed number of inputs
# per target, so it fuzzes as much however loaded the machine is). Started
# once the first go test ended, it had made the run about 2 minutes longer.
nice -n 19 hack/fuzz-smoke.sh >"$out/fuzz-smoke.log" 2>&1 &
fuzz=$!
trap 'kill "$older_bins" "$monitoring" $norace_job $others_job $side_job $norace_tests_job "$fuzz" 2>/dev/null || true' EXIT
for job in $norace_job $others_job $side_job $norace_tests_job; do
	wait "$job" || status=$?
done
tests_took=$((SECONDS - start))
if [ -n "$side_job" ]; then
	echo
	echo ">> SIDE_PKGS and the short packages (the side lane, SIDE_AFTER)"
	cat "$out/side.log"
fi
if [ -n "$norace_tests_job" ]; then
	echo
	echo ">> NORACE_TESTS: ${norace_tests[*]} (without -race)"
	cat "$out/norace-tests.log"
fi
if [ -n "$norace_job" ]; then
	echo
	echo ">> ${norace[*]} (their own go test, without -race)"
	cat "$out/norace.log"
fi
cat /dev/null "${jsons[@]}" >"$json"

echo
echo ">> fuzzing the network-facing parsers (hack/fuzz-smoke.sh, beside the tests; they took ${tests_took}s)"
wait "$fuzz" || status=1
cat "$out/fuzz-smoke.log"

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
# sed reads to the end: head would leave gotestsum writing into a closed pipe.
"${gotestsum[@]}" tool slowest --jsonfile "$json" --threshold 15s | sed -n '1,20p'
echo
"$out/cpuacct" report --records "$records" --events "$json" --whole --components "$CPUACCT_COMPONENTS" || status=1
echo
echo ">> make test took $((SECONDS - start))s after the binaries were built"
# The plain closing line, counting tests and subtests as gotestsum's DONE line does.
count() { grep -c "\"Action\":\"$1\".*\"Test\":" "$json" || true; }
echo "tests: $(count pass) passed, $(count fail) failed, $(count skip) skipped"
"$out/testfailures" "$json" || true
exit $status
