package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// writeHelperEnv makes TestSnapshotWriteHelper act: it is this test binary
// run again as another user or with a file size limit.
const writeHelperEnv = "WRAPPER_SNAPSHOT_WRITE_HELPER"

// TestSnapshotWriteHelper writes a snapshot into $WRAPPER_SNAPSHOT_WRITE_HELPER
// and reports on stdout; it is run by TestSnapshotWriteFailures.
func TestSnapshotWriteHelper(t *testing.T) {
	dir := os.Getenv(writeHelperEnv)
	if dir == "" {
		t.Skip("helper process only")
	}
	if lim := os.Getenv("FSIZE_LIMIT"); lim != "" {
		var n uint64
		fmt.Sscan(lim, &n)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
			t.Fatal(err)
		}
	}
	p, st := newTestPersister(dir, 1000)
	fill(st)
	var logs lineLogger
	p.MaybeWrite(logs.logger(), false)
	st.set("services", "ns/other", testService("other"))
	p.MaybeWrite(logs.logger(), false) // a second failure is not logged again
	fmt.Printf("RESULT failing=%v lines=%d lastError=%q\n", p.failing, len(logs.all()), p.LastError())
	for _, l := range logs.all() {
		fmt.Println("LOG", l)
	}
}

// TestSnapshotWriteFailures: a state directory the wrapper may not write (as
// the DaemonSet's uid 65532 in a root-owned 0755 hostPath) and a full disk
// (a file size limit) fail the write with one error line; the previous
// snapshot stays intact and no temp file is left.
func TestSnapshotWriteFailures(t *testing.T) {
	if os.Getenv(writeHelperEnv) != "" {
		t.Skip("in the helper")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, dir string, attr *syscall.SysProcAttr, env ...string) []byte {
		cmd := exec.Command(self, "-test.run=^TestSnapshotWriteHelper$", "-test.v")
		cmd.Env = append(os.Environ(), append(env, writeHelperEnv+"="+dir)...)
		cmd.SysProcAttr = attr
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		return out
	}
	check := func(t *testing.T, out []byte, dir, errText string) {
		t.Helper()
		if !bytes.Contains(out, []byte("RESULT failing=true lines=1 ")) || !bytes.Contains(out, []byte(errText)) {
			t.Fatalf("helper output, want one failure line with %q:\n%s", errText, out)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) != 0 {
			t.Fatalf("temp files left: %v", left)
		}
	}

	t.Run("full disk", func(t *testing.T) {
		dir := t.TempDir()
		good := goodSnapshot(t, dir)
		out := run(t, dir, nil, "FSIZE_LIMIT=64")
		check(t, out, dir, "file too large")
		if b, err := os.ReadFile(filepath.Join(dir, fileName)); err != nil || !bytes.Equal(b, good) {
			t.Fatalf("the previous snapshot changed: %v", err)
		}
	})
	t.Run("not writable by the wrapper's user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			check(t, run(t, dir, nil), dir, "permission denied")
			return
		}
		// As the DaemonSet runs it: uid 65532, hostPath created root-owned 0755.
		base, err := os.MkdirTemp("", "wrapper-helper-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		bin, dir := filepath.Join(base, "helper"), filepath.Join(base, "state")
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		self = bin
		check(t, run(t, dir, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}), dir, "permission denied")
	})
}
