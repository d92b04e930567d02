package wrapper

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// snapshotFile is the snapshot's name inside the state directory.
const snapshotFile = "snapshot.pb"

// writeFileAtomic replaces dir/name with what write produces, so that a
// reader (or a reboot) sees the old file or the new one, never a mix: a temp
// file in the same directory, fsync, rename, fsync of the directory. The file
// is mode 0600. It returns the bytes written.
func writeFileAtomic(dir, name string, write func(io.Writer) error) (n int64, err error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp") // 0600
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
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
	// The rename is durable only once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return cw.n, err
	}
	defer d.Close()
	return cw.n, d.Sync()
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

// removeStaleTemps removes temp files a crash left between create and rename.
func removeStaleTemps(dir, name string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+name+".*.tmp"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// readSnapshotFile reads path whole, refusing anything that is not a regular
// file or is larger than limit.
func readSnapshotFile(path string, limit int64) ([]byte, error) {
	// Checked before opening: opening a FIFO would block.
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a snapshot may have", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = errors.New("grew beyond the size limit while being read")
	}
	return b, err
}
