package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stepCosts logs what each step of the run cost, as it goes and as a table
// at the end: wall time, the machine's CPU time (every process on it, so
// with the lanes side by side the race go test's too) and, of that, the
// nodes' pods' (their cgroups': kubelet and containerd run outside them).
type stepCosts struct {
	t     *testing.T
	steps []string
	times []time.Duration
	cpus  []stepCPU
}

func (c *stepCosts) step(name string, fn func()) {
	c.t.Helper()
	start, cpu0 := time.Now(), readCPU()
	defer func() {
		cpu := readCPU()
		if cpu.err != nil || cpu0.err != nil {
			c.t.Logf("step %q: CPU not read: %v", name, errors.Join(cpu0.err, cpu.err))
		}
		c.add(name, time.Since(start), cpu.since(cpu0))
	}()
	fn()
}

func (c *stepCosts) add(name string, d time.Duration, cpu stepCPU) {
	c.steps = append(c.steps, name)
	c.times = append(c.times, d)
	c.cpus = append(c.cpus, cpu)
	c.t.Logf("step %q took %s, the machine %s of CPU, the nodes' pods %s of it", name, d.Round(10*time.Millisecond), cpuSeconds(cpu.machine), cpuSeconds(cpu.pods))
}

func (c *stepCosts) report() {
	var b strings.Builder
	var total stepCPU
	fmt.Fprintf(&b, "  %-36s %9s %12s %9s\n", "step", "wall", "machine CPU", "pods CPU")
	for i, s := range c.steps {
		fmt.Fprintf(&b, "  %-36s %9s %12s %9s\n", s, c.times[i].Round(10*time.Millisecond), cpuSeconds(c.cpus[i].machine), cpuSeconds(c.cpus[i].pods))
		total.machine += c.cpus[i].machine
		total.pods += c.cpus[i].pods
	}
	fmt.Fprintf(&b, "  %-36s %9s %12s %9s\n", "all steps", "", cpuSeconds(total.machine), cpuSeconds(total.pods))
	c.t.Logf("cost per step (CPU: user+system seconds of every process on the machine, and of the nodes' pods' cgroups among them):\n%s", b.String())
}

func cpuSeconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// stepCPU is what one step took of the machine's CPU and of its pods'.
type stepCPU struct{ machine, pods time.Duration }

// cpuReading is the machine's busy CPU time and each node's pods' (by
// cgroup) at one moment.
type cpuReading struct {
	machine time.Duration
	pods    map[string]time.Duration
	err     error
}

func readCPU() cpuReading {
	var r cpuReading
	stat, err := os.ReadFile("/proc/stat")
	if err == nil {
		r.machine, err = machineBusy(string(stat))
	}
	if err == nil {
		r.pods, err = podsCPU()
	}
	r.err = err
	return r
}

// since is the CPU spent from r0 to r. A node's cgroup made again (a
// reboot) or new counts from zero; one gone since r0 (powered off) took
// its last seconds' count with it.
func (r cpuReading) since(r0 cpuReading) stepCPU {
	d := stepCPU{machine: r.machine - r0.machine}
	for cg, u := range r.pods {
		if u0, ok := r0.pods[cg]; ok && u >= u0 {
			u -= u0
		}
		d.pods += u
	}
	return d
}

// machineBusy reads /proc/stat's first line: the time all CPUs spent on
// anything but idling or waiting for I/O (user, nice, system, irq,
// softirq; steal is the hypervisor's, guest is counted in user).
func machineBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: no cpu line in %.60q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		ticks += v
	}
	// USER_HZ: 100 on every Linux architecture Go builds for.
	return time.Duration(ticks) * (time.Second / 100), nil
}

// podsCPU sums the CPU time of this run's node cgroups: cpuacct.usage in a
// cgroup v1 hierarchy that counts it, else cgroup2's cpu.stat usage_usec
// (on a hybrid machine the cgroup2 copy would count the same time again).
func podsCPU() (map[string]time.Duration, error) {
	trees, file, parse := cgroupTrees(), "cpu.stat", usageUsec
	for _, h := range cgroupHierarchies() {
		if isFile(filepath.Join(h, "cpuacct.usage")) {
			trees, file, parse = []string{h}, "cpuacct.usage", usageNanoseconds
			break
		}
	}
	usage := map[string]time.Duration{}
	for _, tree := range trees {
		dirs, err := filepath.Glob(filepath.Join(tree, fmt.Sprintf("%s%d-*", cgroupPrefix, os.Getpid())))
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			data, err := os.ReadFile(filepath.Join(d, file))
			if os.IsNotExist(err) {
				continue // removed meanwhile (a reboot), or no such file here
			}
			if err != nil {
				return nil, err
			}
			u, err := parse(string(data))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Join(d, file), err)
			}
			usage[d] = u
		}
	}
	return usage, nil
}

func usageNanoseconds(s string) (time.Duration, error) {
	ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return time.Duration(ns), err
}

// usageUsec reads cpu.stat's usage_usec.
func usageUsec(stat string) (time.Duration, error) {
	for _, line := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in %.80q", stat)
}
