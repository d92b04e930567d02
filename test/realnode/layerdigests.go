package realnode

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layerDigests are what a compressed layer's descriptor and its image's
// config need of it: its digest and size, and its diffID (the digest of
// the uncompressed tar, which takes a gunzip of the whole layer: about
// 15 CPU-seconds a run for the cached layers under -race).
type layerDigests struct {
	// The file they were computed from, as it was: any other size or
	// modification time computes them again.
	FileSize  int64  `json:"fileSize"`
	FileMtime int64  `json:"fileMtimeNanos"`
	Digest    string `json:"digest"`
	DiffID    string `json:"diffID"`
}

// cachedGzipLayer is the layer of the gzipped tarball gz, as
// tarball.LayerFromFile makes it, with its digests read from gz's
// ".digests" file beside it when that still describes gz, and written
// there when not.
func cachedGzipLayer(gz string) (v1.Layer, error) {
	fi, err := os.Stat(gz)
	if err != nil {
		return nil, err
	}
	cache := gz + ".digests"
	var d layerDigests
	if b, err := os.ReadFile(cache); err == nil && json.Unmarshal(b, &d) == nil && d.FileSize == fi.Size() && d.FileMtime == fi.ModTime().UnixNano() {
		digest, err1 := v1.NewHash(d.Digest)
		diffID, err2 := v1.NewHash(d.DiffID)
		if err1 == nil && err2 == nil {
			return partial.CompressedToLayer(&gzFileLayer{path: gz, size: fi.Size(), digest: digest, diffID: diffID})
		}
	}
	layer, err := tarball.LayerFromFile(gz)
	if err != nil {
		return nil, err
	}
	digest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	diffID, err := layer.DiffID()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(layerDigests{FileSize: fi.Size(), FileMtime: fi.ModTime().UnixNano(), Digest: digest.String(), DiffID: diffID.String()})
	if err != nil {
		return nil, err
	}
	tmp := cache + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, cache); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return layer, nil
}

// gzFileLayer is a gzipped tarball on disk whose digests are known.
type gzFileLayer struct {
	path           string
	size           int64
	digest, diffID v1.Hash
}

func (l *gzFileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *gzFileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *gzFileLayer) Size() (int64, error)                { return l.size, nil }
func (l *gzFileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }
func (l *gzFileLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
