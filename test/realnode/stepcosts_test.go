package realnode

import (
	"testing"
	"time"
)

func TestMachineBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  1000 20 300 9000 50 4 6 70 0 0\ncpu0 500 10 150 4500 25 2 3 35 0 0\n"
	got, err := machineBusy(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (1000 + 20 + 300 + 4 + 6) * 10 * time.Millisecond; got != want {
		t.Errorf("machineBusy = %v, want %v (idle, iowait and steal left out)", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := machineBusy(bad); err == nil {
			t.Errorf("machineBusy(%q): no error", bad)
		}
	}
}

func TestUsageUsec(t *testing.T) {
	got, err := usageUsec("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	if err != nil || got != 2500*time.Millisecond {
		t.Errorf("usageUsec = %v, %v; want 2.5s", got, err)
	}
	if _, err := usageUsec("nr_periods 0\n"); err == nil {
		t.Error("usageUsec without usage_usec: no error")
	}
	if got, err := usageNanoseconds("1500000000\n"); err != nil || got != 1500*time.Millisecond {
		t.Errorf("usageNanoseconds = %v, %v; want 1.5s", got, err)
	}
}

func TestCPUSinceAReboot(t *testing.T) {
	before := cpuReading{machine: 100 * time.Second, pods: map[string]time.Duration{"node0": 40 * time.Second, "node1": 30 * time.Second}}
	after := cpuReading{machine: 130 * time.Second, pods: map[string]time.Duration{"node0": 50 * time.Second, "node1": 32 * time.Second}}
	if got := after.since(before); got != (stepCPU{machine: 30 * time.Second, pods: 12 * time.Second}) {
		t.Errorf("since = %+v", got)
	}
	// node0's cgroup made anew counts from zero (5 s); node1 powered off
	// counts nothing; node2, new, all it has.
	later := cpuReading{machine: 160 * time.Second, pods: map[string]time.Duration{"node0": 5 * time.Second, "node2": 7 * time.Second}}
	if got := later.since(after); got != (stepCPU{machine: 30 * time.Second, pods: 12 * time.Second}) {
		t.Errorf("since a reboot = %+v", got)
	}
}
