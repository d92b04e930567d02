package owneddir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestSweepsOnlyTheDead(t *testing.T) {
	prefix := "servicegroup-sweeptest-" + strconv.Itoa(os.Getpid()) + "-"
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	})

	// A process that has exited: its PID is free (reuse within this test is
	// vanishingly unlikely, and would only keep the directory).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := mkOwned(t, prefix, strconv.Itoa(cmd.Process.Pid))
	living := mkOwned(t, prefix, strconv.Itoa(os.Getppid()))
	unmarked, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}

	mine, err := Make(prefix)
	if err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]bool{dead: false, living: true, unmarked: true, mine: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", dir, err == nil, want)
		}
	}
	data, err := os.ReadFile(filepath.Join(mine, ownerFile))
	if err != nil || string(data) != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner mark of %s = %q, %v; want this process's PID", mine, data, err)
	}
}

func mkOwned(t *testing.T, prefix, pid string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(pid), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestUse(t *testing.T) {
	given := filepath.Join(t.TempDir(), "a", "b")
	path, owned, err := Use(given, "unused-")
	if err != nil || path != given || owned {
		t.Fatalf("Use(%q) = %q, %v, %v; want the directory itself, not owned", given, path, owned, err)
	}
	if fi, err := os.Stat(given); err != nil || !fi.IsDir() {
		t.Fatalf("Use did not make %s: %v", given, err)
	}

	prefix := "servicegroup-usetest-" + strconv.Itoa(os.Getpid()) + "-"
	path, owned, err = Use("", prefix)
	if err != nil || !owned || !strings.HasPrefix(filepath.Base(path), prefix) {
		t.Fatalf(`Use("") = %q, %v, %v; want an owned directory named %s*`, path, owned, err, prefix)
	}
	defer os.RemoveAll(path)
	if data, err := os.ReadFile(filepath.Join(path, ownerFile)); err != nil || string(data) != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner mark %q, %v; want this PID", data, err)
	}

	if _, _, err := Use(filepath.Join(path, ownerFile, "x"), prefix); err == nil {
		t.Error("Use under a file: no error")
	}
}
