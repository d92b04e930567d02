package superedge

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The fleet benchmark counts a controller's writes from the apiserver's
// audit log (an independent source: the controller under test cannot
// miscount them), by the user its client certificate names.

// auditPolicyFor records every write request of users, once complete.
func auditPolicyFor(users ...string) string {
	return `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  users: ["` + strings.Join(users, `", "`) + `"]
- level: None
`
}

// auditFlags writes the policy into dir and returns the apiserver flags
// logging to dir/audit.log.
func auditFlags(dir string, users ...string) ([]string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicyFor(users...)), 0o644); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + log, "--audit-log-format=json",
		"--audit-log-mode=blocking", "--audit-log-maxsize=0"}, log, nil
}

// writeCounts are one user's write requests by what they wrote.
type writeCounts struct {
	All          int // every write request, failed ones included
	ChildCreates int // Deployments and StatefulSets created (201)
	ChildWrites  int // any write of a Deployment or StatefulSet (not its status)
	Services     int // Services created (201)
	ServiceWrite int // any write of a Service
	GridStatus   int // writes of a grid's status subresource
	Grids        int // writes of a grid itself (SuperEdge writes defaults back)
	Summaries    int // NodeLabelSummary writes
	Events       int
	Conflicts    int // answered 409
	// By counts every write by "verb resource[/subresource] code".
	By map[string]int
}

func (c writeCounts) minus(o writeCounts) writeCounts {
	return writeCounts{c.All - o.All, c.ChildCreates - o.ChildCreates, c.ChildWrites - o.ChildWrites,
		c.Services - o.Services, c.ServiceWrite - o.ServiceWrite, c.GridStatus - o.GridStatus,
		c.Grids - o.Grids, c.Summaries - o.Summaries, c.Events - o.Events, c.Conflicts - o.Conflicts, diffBy(c.By, o.By)}
}

func diffBy(now, was map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range now {
		if d := v - was[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// top lists By's n largest entries, largest first.
func (c writeCounts) top(n int) string {
	keys := slices.Collect(maps.Keys(c.By))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(c.By[b]-c.By[a], strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s: %d", k, c.By[k]))
	}
	return strings.Join(parts, ", ")
}

// Other is what the named counts leave out (CRDs, leases, ...).
func (c writeCounts) Other() int {
	return c.All - c.ChildWrites - c.ServiceWrite - c.GridStatus - c.Grids - c.Summaries - c.Events
}

// auditCounter reads the audit log incrementally.
type auditCounter struct {
	path string
	user string

	mu     sync.Mutex
	offset int64
	rest   []byte
	counts writeCounts
	last   time.Time // when the last write of user was logged (by the reader's clock)
	// created: when the apiserver received each child create (201), in
	// the log's order, for where a phase's time goes.
	created []time.Time
}

func newAuditCounter(path, user string) *auditCounter {
	return &auditCounter{path: path, user: user, last: time.Now()}
}

// scan reads what the log gained since the last scan and returns the
// counts so far.
func (a *auditCounter) scan() (writeCounts, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, err := a.read()
	c.By = maps.Clone(c.By)
	return c, err
}

func (a *auditCounter) read() (writeCounts, error) {
	f, err := os.Open(a.path)
	if os.IsNotExist(err) {
		return a.counts, nil
	}
	if err != nil {
		return a.counts, err
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, 0); err != nil {
		return a.counts, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var buf bytes.Buffer
	n, err := buf.ReadFrom(r)
	if err != nil {
		return a.counts, err
	}
	a.offset += n
	data := append(a.rest, buf.Bytes()...)
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		a.rest = data
		return a.counts, nil
	}
	a.rest = append([]byte(nil), data[end+1:]...)
	seen := false
	for _, line := range bytes.Split(data[:end], []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return a.counts, fmt.Errorf("audit log line %q: %w", line, err)
		}
		if ev.User.Username != a.user || ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil {
			continue
		}
		seen = true
		a.count(&ev)
	}
	if seen {
		a.last = time.Now()
	}
	return a.counts, nil
}

func (a *auditCounter) count(ev *auditv1.Event) {
	c := &a.counts
	c.All++
	code := 0
	if ev.ResponseStatus != nil {
		code = int(ev.ResponseStatus.Code)
	}
	if code == 409 {
		c.Conflicts++
	}
	res, sub := ev.ObjectRef.Resource, ev.ObjectRef.Subresource
	if c.By == nil {
		c.By = map[string]int{}
	}
	key := ev.Verb + " " + res
	if sub != "" {
		key += "/" + sub
	}
	c.By[fmt.Sprintf("%s %d", key, code)]++
	switch {
	case (res == "deployments" || res == "statefulsets") && sub == "":
		c.ChildWrites++
		if ev.Verb == "create" && code == 201 {
			c.ChildCreates++
			a.created = append(a.created, ev.RequestReceivedTimestamp.Time)
		}
	case res == "services" && sub == "":
		c.ServiceWrite++
		if ev.Verb == "create" && code == 201 {
			c.Services++
		}
	case strings.HasSuffix(res, "grids") && sub == "status":
		c.GridStatus++
	case strings.HasSuffix(res, "grids"):
		c.Grids++
	case res == "nodelabelsummaries":
		c.Summaries++
	case res == "events":
		c.Events++
	}
}

// createdSince returns when the apiserver received the child creates
// logged after the first n (n: ChildCreates of an earlier scan), earliest
// first.
func (a *auditCounter) createdSince(n int) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n >= len(a.created) {
		return nil
	}
	out := slices.Clone(a.created[n:])
	slices.SortFunc(out, func(x, y time.Time) int { return x.Compare(y) })
	return out
}

// quietFor reports how long ago the user's last write was logged.
func (a *auditCounter) quietFor() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Since(a.last)
}

// procUsage is one process's CPU time so far and memory, from /proc.
type procUsage struct {
	CPU   time.Duration
	RSS   int64 // bytes
	HWM   int64 // peak RSS, bytes
	Alive bool
}

// clockTicks is USER_HZ, 100 on Linux for every architecture Go supports.
const clockTicks = 100

func readProc(pid int) procUsage {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procUsage{}
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return procUsage{}
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	u := procUsage{CPU: time.Duration(utime+stime) * time.Second / clockTicks, Alive: true}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.RSS = kb << 10
		case "VmHWM":
			u.HWM = kb << 10
		}
	}
	return u
}

// rssPeak samples a process's RSS every half second and keeps the highest
// since the last reset (VmHWM covers the whole life; a phase needs its own).
type rssPeak struct {
	pid  int
	mu   sync.Mutex
	peak int64
	stop chan struct{}
	done chan struct{}
}

func watchRSS(pid int) *rssPeak {
	p := &rssPeak{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			p.sample()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *rssPeak) sample() {
	u := readProc(p.pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if u.RSS > p.peak {
		p.peak = u.RSS
	}
}

// take returns the peak since the last take and starts a new one.
func (p *rssPeak) take() int64 {
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.peak
	p.peak = 0
	return v
}

func (p *rssPeak) close() {
	close(p.stop)
	<-p.done
}
