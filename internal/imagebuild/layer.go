package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer. A Mode with fs.ModeDir makes a directory.
type File struct {
	Path     string // absolute, e.g. /etc/passwd
	Mode     fs.FileMode
	UID, GID int
	Data     []byte
}

// NewLayer returns an OCI layer holding files, with parent directories
// added, entries sorted by path, and every timestamp set to mtime, so the
// same files always give the same digest.
func NewLayer(files []File, mtime time.Time) (v1.Layer, error) {
	entries := withParents(files)
	slices.SortFunc(entries, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range entries {
		name := strings.TrimPrefix(f.Path, "/")
		h := &tar.Header{
			Name:    name,
			Mode:    int64(f.Mode.Perm()) | stickyBits(f.Mode),
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.Mode.IsDir() {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// Compressed once, here: given the tar stream, the layer would gzip it
	// again for its digest, for the layout and for every push (a binary of
	// tens of MB each time). Same level as tarball's default, so the same
	// bytes and digests.
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// stickyBits maps fs.ModeSticky (wanted on /tmp) to its tar mode bit.
func stickyBits(m fs.FileMode) int64 {
	if m&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// withParents adds a root-owned 0755 directory for every parent that files
// do not list themselves, so extractors never invent their own modes.
func withParents(files []File) []File {
	have := map[string]bool{}
	for _, f := range files {
		have[f.Path] = true
	}
	out := slices.Clone(files)
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "/" && !have[dir]; dir = path.Dir(dir) {
			have[dir] = true
			out = append(out, File{Path: dir, Mode: fs.ModeDir | 0o755})
		}
	}
	return out
}
