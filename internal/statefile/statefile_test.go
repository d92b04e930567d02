package statefile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/testwait"
)

func TestWriteAtomicAndRead(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"first", "second, longer"} {
		n, err := WriteAtomic(dir, "state", func(w io.Writer) error { _, err := io.WriteString(w, content); return err })
		if err != nil || n != int64(len(content)) {
			t.Fatalf("WriteAtomic: %d, %v", n, err)
		}
		b, err := Read(filepath.Join(dir, "state"), 100)
		if err != nil || string(b) != content {
			t.Fatalf("Read: %q, %v; want %q", b, err, content)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "state"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestWriteAtomicFailureKeepsOld: a failing writer leaves the old file and
// no temporary file.
func TestWriteAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteAtomic(dir, "state", func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := WriteAtomic(dir, "state", func(w io.Writer) error { io.WriteString(w, "half"); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "state")); string(b) != "old" {
		t.Fatalf("content %q after a failed write", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".state.*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	notDir := filepath.Join(dir, "state") // a file: no directory can be made there
	if _, err := WriteAtomic(notDir, "state", func(io.Writer) error { return nil }); err == nil {
		t.Fatal("write below a regular file succeeded")
	}
}

// TestWriteAtomicMakesDir: a missing directory is made, mode 0700.
func TestWriteAtomicMakesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "removed", "state")
	if _, err := WriteAtomic(dir, "state", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, want 0700", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "state")); string(b) != "x" {
		t.Fatalf("content %q", b)
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{".state.123.tmp", ".state.9.tmp", "state", ".other.1.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	RemoveTemps(dir, "state")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if len(left) != 2 || left[0] != ".other.1.tmp" || left[1] != "state" {
		t.Fatalf("left %v, want .other.1.tmp and state", left)
	}
}

// TestReadRefuses: a FIFO is refused without blocking, a directory too, an
// oversized file by its size, a missing one as fs.ErrNotExist.
func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 100); done <- err }()
	select {
	case err := <-done:
		var se *Error
		if !errors.Is(err, ErrNotRegular) || !errors.As(err, &se) || se.Reason != ReasonNotRegular {
			t.Fatalf("FIFO: %v, want an Error with ErrNotRegular", err)
		}
	case <-time.After(testwait.Floor):
		t.Fatalf("Read blocked on a FIFO for %s", testwait.Floor)
	}
	if _, err := Read(dir, 100); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v, want ErrNotRegular", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 101), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(big, 100); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("101 bytes with limit 100: %v, want ErrTooLarge", err)
	}
	if b, err := Read(big, 101); err != nil || len(b) != 101 {
		t.Fatalf("101 bytes with limit 101: %d, %v", len(b), err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v, want fs.ErrNotExist", err)
	}
}

func TestCheckWritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := CheckWritable(dir, "state"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir %v, %v", st, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}
