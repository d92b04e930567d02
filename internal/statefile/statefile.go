// Package statefile writes and reads the state files the wrapper and
// gridhosts keep on a node's disk (their snapshots, the wrapper's
// resourceVersion reservation): replaced atomically, durable once written,
// never read unbounded or from anything but a regular file. Files that
// must not be used when damaged or written by another format (the
// snapshots) are framed with their kind, version and a checksum
// (framing.go). Every reason not to use a file is one Error.
package statefile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// tempPattern names the temporary files beside name; RemoveTemps finds
// those a crash left between create and rename.
func tempPattern(name string) string { return "." + name + ".*.tmp" }

// WriteAtomic replaces dir/name with what write produces, so that a reader
// (or a power loss) sees the old file or the new one, never a mix: a
// temporary file in the same directory (mode 0600), synced, renamed over
// name, and the directory synced so the rename itself is durable. Every
// step's error is returned, the directory sync's included; on error the
// temporary file is removed. A missing dir is made (0700), so a state
// directory removed while its owner runs is there again at the next write.
// It returns the bytes written.
func WriteAtomic(dir, name string, write func(io.Writer) error) (n int64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, tempPattern(name)) // 0600
	if err != nil {
		return 0, err
	}
	renamed := false
	defer func() {
		if err != nil {
			_ = f.Close()
			if !renamed {
				_ = os.Remove(f.Name())
			}
		}
	}()
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err = write(bw); err != nil {
		return 0, err
	}
	if err = bw.Flush(); err != nil {
		return 0, err
	}
	if err = f.Sync(); err != nil {
		return 0, err
	}
	if err = f.Close(); err != nil {
		return 0, err
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return 0, err
	}
	renamed = true
	d, err := os.Open(dir)
	if err != nil {
		return cw.n, fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return cw.n, fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// RemoveTemps removes the temporary files of dir/name a crash left between
// create and rename.
func RemoveTemps(dir, name string) {
	matches, _ := filepath.Glob(filepath.Join(dir, tempPattern(name)))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// CheckWritable creates (0700) dir if it is missing and checks that a file
// can be created in it, so an unwritable directory is reported at start-up
// rather than at the first write.
func CheckWritable(dir, name string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPattern(name))
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// ErrNotRegular is wrapped in an Error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped in an Error for a file larger than the read limit.
var ErrTooLarge = errors.New("larger than the limit")

// Read reads path whole. It refuses anything that is not a regular file
// before opening it (opening a FIFO would block) and again on the open
// file (it may have been replaced in between), and a file larger than
// limit. Every error is an *Error; a missing file's satisfies
// errors.Is(err, fs.ErrNotExist).
func Read(path string, limit int64) ([]byte, error) {
	fail := func(reason string, err error) ([]byte, error) {
		return nil, &Error{Path: path, Reason: reason, Err: err}
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(ReasonMissing, err)
	}
	if err != nil {
		return fail(ReasonUnreadable, err)
	}
	if !st.Mode().IsRegular() {
		return fail(ReasonNotRegular, fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type()))
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(ReasonUnreadable, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return fail(ReasonUnreadable, err)
	}
	if !st.Mode().IsRegular() {
		return fail(ReasonNotRegular, fmt.Errorf("%w (%s)", ErrNotRegular, st.Mode().Type()))
	}
	if st.Size() > limit {
		return fail(ReasonTooLarge, fmt.Errorf("%d bytes, %w of %d", st.Size(), ErrTooLarge, limit))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return fail(ReasonUnreadable, err)
	}
	if int64(len(b)) > limit {
		return fail(ReasonTooLarge, fmt.Errorf("grew while being read: %w of %d", ErrTooLarge, limit))
	}
	return b, nil
}
