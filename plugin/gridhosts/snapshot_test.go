package gridhosts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"k8s.io/klog/v2/textlogger"

	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/internal/testenv"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

var demoOwner = snapshot.Owner{Node: "node-1", Zones: []string{"cluster.local."}}

// writeDemoSnapshot writes the demo objects' snapshot to a new file and
// returns its path.
func writeDemoSnapshot(t testing.TB, owner snapshot.Owner) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gridhosts.snapshot")
	if err := snapshot.NewWriter(path, time.Minute, owner).Write(demoHandler(demoObjects()).index, false); err != nil {
		t.Fatal(err)
	}
	return path
}

// snapshotQueries are asked of a live and a snapshot-fed handler alike.
var snapshotQueries = []struct {
	name  string
	qtype uint16
}{
	{demoName, dns.TypeA},
	{demoName, dns.TypeAAAA},
	{"statefulsetgrid-demo-1.servicegrid-demo-svc.default.svc.cluster.local.", dns.TypeA},
	{"nodeunit1-db-0.db.default.svc.cluster.local.", dns.TypeA},
	{"hl.default.svc.cluster.local.", dns.TypeA},
	{"hl.default.svc.cluster.local.", dns.TypeSRV},
	{"_http._tcp.hl.default.svc.cluster.local.", dns.TypeSRV},
	{"_grpc._tcp.hl.default.svc.cluster.local.", dns.TypeSRV},
	{"kubernetes.default.svc.cluster.local.", dns.TypeA},
}

func answerText(t *testing.T, g *GridHosts, remote, name string, qtype uint16) string {
	t.Helper()
	rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: remote})
	if _, err := g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, qtype)); err != nil {
		t.Fatal(err)
	}
	if rec.Msg == nil {
		return "no message"
	}
	rec.Msg.Id = 0
	return rec.Msg.String()
}

// TestSnapshotRoundTrip: an index written and read back answers every
// query exactly as the live index it was written from, for every node and
// in clients mode; the file is 0600; an unchanged index is not rewritten.
func TestSnapshotRoundTrip(t *testing.T) {
	path := writeDemoSnapshot(t, demoOwner)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	h, b, err := snapshot.Read(path, demoOwner)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(h.Written) > time.Minute || !h.Owner.Equal(demoOwner) {
		t.Fatalf("header %+v", h)
	}
	live := demoHandler(demoObjects())
	saved := New([]string{"cluster.local."})
	saved.snap.Store(b.Index(false)) // not synced: answers come from the snapshot
	if !saved.Ready() {
		t.Fatal("not ready while serving a snapshot")
	}
	for _, node := range []string{"node-1", "node-2", "node-3", "node-4", "missing"} {
		live.Node, saved.Node = node, node
		for _, q := range snapshotQueries {
			if got, want := answerText(t, saved, "", q.name, q.qtype), answerText(t, live, "", q.name, q.qtype); got != want {
				t.Errorf("node %s %s %s: from snapshot\n%s\nlive\n%s", node, dns.TypeToString[q.qtype], q.name, got, want)
			}
		}
	}
	live.Node, saved.Node, live.Clients, saved.Clients = "", "", true, true
	for _, remote := range []string{"10.0.0.2", "10.1.1.1", "10.1.2.1", "192.0.2.1"} {
		for _, q := range snapshotQueries {
			if got, want := answerText(t, saved, remote, q.name, q.qtype), answerText(t, live, remote, q.name, q.qtype); got != want {
				t.Errorf("client %s %s %s: from snapshot\n%s\nlive\n%s", remote, dns.TypeToString[q.qtype], q.name, got, want)
			}
		}
	}

	// Unchanged content is not written again; forced (shutdown) it is.
	s := snapshot.NewWriter(path, time.Minute, demoOwner)
	if err := s.Write(live.index, false); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := s.Write(live.index, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unchanged index rewritten: %v", err)
	}
	live.index.Upsert(newNode("node-9", nil, "10.0.0.9"))
	if err := s.Write(live.index, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("changed index not written: %v", err)
	}
	os.Remove(path)
	if err := s.Write(live.index, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("forced write: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestSnapshotBadFiles: every kind of unusable snapshot is refused with
// one log line naming the reason, and nothing is served from it.
func TestSnapshotBadFiles(t *testing.T) {
	good, err := os.ReadFile(writeDemoSnapshot(t, demoOwner))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(at int) []byte {
		c := bytes.Clone(good)
		c[at] ^= 0x40
		return c
	}
	framed := func(f statefile.Format, payload []byte) []byte {
		dir := t.TempDir()
		if _, err := statefile.WriteFramed(dir, "s", f, func(w io.Writer) error { _, err := w.Write(payload); return err }); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "s"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	payload, err := statefile.Unframe(good, snapshot.Format)
	if err != nil {
		t.Fatal(err)
	}
	newer := snapshot.Format
	newer.Version++
	// The layout before statefile's framing began with these magic bytes.
	unframed := append([]byte("GHSNAP\r\n\x00\x00\x00\x01"), payload...)

	fifoData := []byte("fifo") // a marker: a named pipe at the path
	cases := []struct {
		name  string
		data  []byte // nil: no file
		owner snapshot.Owner
		want  string
	}{
		{"missing", nil, demoOwner, "reason=\"missing\""},
		{"a FIFO", fifoData, demoOwner, "not a regular file"}, // opening it would block
		{"empty", []byte{}, demoOwner, "reason=\"empty\""},
		{"truncated", good[:len(good)/2], demoOwner, "reason=\"truncated\""},
		{"trailing bytes", append(bytes.Clone(good), 0), demoOwner, "reason=\"truncated\""},
		{"flipped byte", flip(len(good) / 2), demoOwner, "checksum mismatch"},
		{"not a snapshot", []byte("10.0.0.1 web-0.svc.default.svc.cluster.local\n"), demoOwner, "reason=\"unknown-format\""},
		{"the layout before the framing", unframed, demoOwner, "reason=\"previous-format\""},
		{"wrong version", framed(newer, payload), demoOwner, "gridhosts-snapshot version 2, this build reads version 1"},
		{"undecodable body", framed(snapshot.Format, payload[:len(payload)-5]), demoOwner, "undecodable body"},
		{"header length beyond the payload", framed(snapshot.Format, []byte{0, 1, 0, 0, 1}), demoOwner, "reason=\"truncated\""},
		{"foreign node", good, snapshot.Owner{Node: "node-2", Zones: []string{"cluster.local."}}, "belongs to another owner (node node-1, node mode, zones cluster.local.; this is node node-2, node mode"},
		{"other mode", good, snapshot.Owner{Node: "node-1", Clients: true, Zones: []string{"cluster.local."}}, "clients mode"},
		{"other zones", good, snapshot.Owner{Node: "node-1", Zones: []string{"example.org."}}, "zones example.org."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gridhosts.snapshot")
			if len(tc.data) > 0 && &tc.data[0] == &fifoData[0] {
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if tc.data != nil {
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var log bytes.Buffer
			g := New([]string{"cluster.local."})
			g.snapshot = snapshot.NewWriter(path, time.Minute, tc.owner)
			x, _, _ := g.loadSnapshot(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&log))))
			if x != nil {
				t.Fatal("bad snapshot loaded")
			}
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "Snapshot not used") || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("log %q, want one line with %q", log.String(), tc.want)
			}
			if g.Ready() {
				t.Fatal("ready without sync or snapshot")
			}
		})
	}
}

// snapshotHelperEnv selects a write scenario run in a child process (see
// TestSnapshotWriteHelper): the process's own user or mounts change there.
const snapshotHelperEnv = "GRIDHOSTS_SNAPSHOT_HELPER"

// TestSnapshotUnwritable: the snapshot directory as the DaemonSet's pod
// (uid 65532) finds a root-owned hostPath, a read-only file system and a
// full disk. Each gives one Warning line however often it is retried, and
// answers continue from memory.
func TestSnapshotUnwritable(t *testing.T) {
	testenv.Root(t, "runs a child as another user and in its own mount namespace")
	// A copy of this test binary that uid 65532 may run.
	bin := filepath.Join(worldReadableDir(t), "gridhosts.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scenario string
		attr     *syscall.SysProcAttr
		want     string
	}{
		{"not-owner", &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}, "permission denied"},
		{"read-only", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}, "read-only file system"},
		{"full", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}, "no space left on device"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			dir := worldReadableDir(t) // root-owned 0755, as a DirectoryOrCreate hostPath
			cmd := exec.Command(bin, "-test.run", "^TestSnapshotWriteHelper$", "-test.v")
			cmd.Env = append(os.Environ(), snapshotHelperEnv+"="+tc.scenario+":"+dir)
			cmd.SysProcAttr = tc.attr
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			var warnings []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "cannot write snapshot") {
					warnings = append(warnings, l)
				}
			}
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "W") || !strings.Contains(warnings[0], tc.want) {
				t.Fatalf("want one Warning line with %q, got %q\n%s", tc.want, warnings, out)
			}
			t.Log(warnings[0])
			if !strings.Contains(string(out), "SERVED 10.1.1.1") {
				t.Fatalf("no answer from memory:\n%s", out)
			}
		})
	}
}

// worldReadableDir is a new root-owned 0755 directory every user can reach.
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gridhosts-snapshot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSnapshotWriteHelper is the child of TestSnapshotUnwritable.
func TestSnapshotWriteHelper(t *testing.T) {
	scenario, dir, ok := strings.Cut(os.Getenv(snapshotHelperEnv), ":")
	if !ok {
		t.Skip("only run by TestSnapshotUnwritable")
	}
	mount := func(flags uintptr, data string) {
		// Private propagation: nothing mounted here reaches the host.
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, data); err != nil {
			t.Fatal(err)
		}
	}
	switch scenario {
	case "read-only":
		mount(syscall.MS_RDONLY, "size=1m")
	case "full":
		mount(0, "size=64k")
		os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 1<<20), 0o600) // fails once full
	}
	g := demoHandler(demoObjects())
	g.Node = "node-1"
	g.snapshot = snapshot.NewWriter(filepath.Join(dir, "gridhosts.snapshot"), time.Second, demoOwner)
	g.snapshot.Prepare()
	for range 3 {
		if err := g.snapshot.Write(g.index, false); err == nil {
			t.Fatal("write succeeded")
		}
	}
	if err := g.snapshot.Write(g.index, true); err == nil {
		t.Fatal("forced write succeeded")
	}
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	g.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(demoName, dns.TypeA))
	for _, rr := range rec.Msg.Answer {
		t.Logf("SERVED %s", rr.(*dns.A).A)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
