# shellcheck shell=bash
# Sourced by .ci/run and hack/test.sh: the machine's transparent huge pages.
#
# Go's runtime does not ask for huge pages (madvise(2)), so where the kernel
# leaves them to madvise (CI's machines' kernel does) every Go program, compiler and
# test binary faults its heap in 4 KiB at a time. On a VM whose page faults
# are costly that is a large share of a run: on the slow kind of CI machine
# a 4 KiB fault cost 13-30 us (1 GiB touched: 262,000 faults, 3.5 CPU-s),
# and with "always" the controller package's tests took 0.71-0.73x the CPU
# and a compile from an empty cache 0.63-0.65x (docs/benchmarks/ci-runs.md).
# The real-node test's pods, at their manifests' memory limits (256 MiB and
# more), pass with it.

hugepages_file=/sys/kernel/mm/transparent_hugepage/enabled

# hugepages_mode prints the setting in force ("always", "madvise", "never"),
# or nothing where the kernel has none.
hugepages_mode() {
	sed -n 's/.*\[\(.*\)\].*/\1/p' "$hugepages_file" 2>/dev/null || true
}

# hugepages_always turns them on for every process where it may (root, a
# writable /sys) and prints what it did; the setting it replaced is left in
# hugepages_was, for hugepages_restore.
hugepages_was=
hugepages_always() {
	local mode
	mode=$(hugepages_mode)
	if [ -z "$mode" ] || [ "$mode" = always ]; then
		echo ">> transparent huge pages: ${mode:-not offered by this kernel}"
	elif { echo always >"$hugepages_file"; } 2>/dev/null; then
		hugepages_was=$mode
		echo ">> transparent huge pages: always for this run (was $mode; put back at its end)"
	else
		echo ">> transparent huge pages: $mode, which this user cannot change: on a VM with costly page faults the run takes more CPU (hack/lib/hugepages.sh)"
	fi
}

# hugepages_restore puts back the setting hugepages_always replaced.
hugepages_restore() {
	if [ -n "$hugepages_was" ]; then
		{ echo "$hugepages_was" >"$hugepages_file"; } 2>/dev/null || true
		hugepages_was=
	fi
}
