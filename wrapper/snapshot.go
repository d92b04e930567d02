package wrapper

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/servicegroup/servicegroup/internal/statefile"
)

// The on-disk snapshot of what the wrapper serves: package statefile's
// framing (kind, version, checksum) around a payload of length-delimited
// frames (4-byte big-endian length, as apimachinery's framer writes protobuf
// watch streams):
//
//	header (JSON) | one protobuf List per section, in header order
//
// The header carries the node and upstream the snapshot belongs to and, per
// resource, the resourceVersions its served state was current for.
const (
	// snapshotMaxBytes bounds what is read back: far above any real node's state.
	snapshotMaxBytes = 1 << 30
)

// snapshotFormat is the snapshot's framing. The layout before the framing
// (header frame first, kind ApplicationGridWrapperSnapshot) is recognized
// and not read: the snapshot is rewritten within seconds of upstream
// answering, so only a restart in that window during an outage misses it.
var snapshotFormat = statefile.Format{Kind: "wrapper-snapshot", Version: 1, Previous: isUnframedSnapshot}

// isUnframedSnapshot recognizes the layout before statefile's framing: a
// length-delimited JSON header of kind ApplicationGridWrapperSnapshot.
func isUnframedSnapshot(data []byte) bool {
	return len(data) > 4 && bytes.HasPrefix(data[4:], []byte(`{"kind":"ApplicationGridWrapperSnapshot"`))
}

// snapshotHeader is the first frame of a snapshot.
type snapshotHeader struct {
	NodeName  string            `json:"nodeName"`
	Upstream  string            `json:"upstream"`
	WrittenAt time.Time         `json:"writtenAt"`
	Sections  []snapshotSection `json:"sections"`
}

// snapshotSection describes one resource's frame. The writing process served
// exactly these objects at every resourceVersion in [From, At]: From is its
// last change of this resource, At the clock when it was read.
type snapshotSection struct {
	Resource string `json:"resource"`
	From     uint64 `json:"from"`
	At       uint64 `json:"at"`
	Objects  int    `json:"objects"`
}

// snapshot is a decoded, validated snapshot: objects by resource, keyed as
// the stores key them.
type snapshot struct {
	header  snapshotHeader
	objects map[string]map[string]Object
}

func (sn *snapshot) section(resource string) snapshotSection {
	for _, s := range sn.header.Sections {
		if s.Resource == resource {
			return s
		}
	}
	return snapshotSection{}
}

// snapshotCodec encodes lists as protobuf and decodes them strictly to the
// types the client-go scheme knows.
type snapshotCodec struct {
	codecs serializer.CodecFactory
	proto  runtime.Serializer
}

func newSnapshotCodec() snapshotCodec {
	return snapshotCodec{
		codecs: serializer.NewCodecFactory(scheme.Scheme),
		proto:  protobuf.NewSerializer(scheme.Scheme, scheme.Scheme),
	}
}

// snapshotList is one section's content to encode.
type snapshotList struct {
	section snapshotSection
	res     *resource
	items   []Object
}

// encode writes a snapshot's payload of lists to w.
func (c snapshotCodec) encode(w io.Writer, h snapshotHeader, lists []snapshotList) error {
	h.Sections = nil
	for _, l := range lists {
		h.Sections = append(h.Sections, l.section)
	}
	fw := framer.NewLengthDelimitedFrameWriter(w)
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if _, err := fw.Write(hb); err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, l := range lists {
		buf.Reset()
		enc := c.codecs.EncoderForVersion(c.proto, l.res.gv)
		if err := enc.Encode(l.res.newList(l.items, strconv.FormatUint(l.section.At, 10)), &buf); err != nil {
			return fmt.Errorf("encode %s: %w", l.res.name, err)
		}
		if _, err := fw.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// badSnapshot is why a snapshot's payload is not used.
func badSnapshot(reason, format string, args ...any) error {
	return statefile.Errorf(reason, format, args...)
}

// Reasons a snapshot's payload is not used (package statefile's).
const (
	snapTruncated = statefile.ReasonTruncated
	snapCorrupt   = statefile.ReasonCorrupt
	snapForeign   = statefile.ReasonForeign
	snapInvalid   = statefile.ReasonInvalid
)

// nextFrame splits one length-delimited frame off b.
func nextFrame(b []byte) (frame, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, badSnapshot(snapTruncated, "%d bytes left, a frame needs at least 4", len(b))
	}
	n := uint64(binary.BigEndian.Uint32(b))
	if n > uint64(len(b)-4) {
		return nil, nil, badSnapshot(snapTruncated, "frame of %d bytes, %d left", n, len(b)-4)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// decode checks and decodes a snapshot's payload written for node and
// upstream. Every problem is a *statefile.Error; nothing in data can make it
// panic.
func (c snapshotCodec) decode(data []byte, node, upstream string) (*snapshot, error) {
	hb, rest, err := nextFrame(data)
	if err != nil {
		return nil, err
	}
	var h snapshotHeader
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, badSnapshot(snapCorrupt, "header: %v", err)
	}
	if h.NodeName != node {
		return nil, badSnapshot(snapForeign, "written for node %q, this is node %q", h.NodeName, node)
	}
	if h.Upstream != upstream {
		return nil, badSnapshot(snapForeign, "written for upstream %q, this wrapper's upstream is %q", h.Upstream, upstream)
	}
	if h.WrittenAt.IsZero() {
		return nil, badSnapshot(snapInvalid, "no writtenAt time")
	}
	known := snapshotResources()
	if len(h.Sections) != len(servedResources) && len(h.Sections) != len(known) {
		return nil, badSnapshot(snapInvalid, "%d sections, want %d or %d", len(h.Sections), len(servedResources), len(known))
	}
	sn := &snapshot{header: h, objects: map[string]map[string]Object{}}
	for _, sec := range h.Sections {
		var res *resource
		for _, r := range known {
			if r.name == sec.Resource {
				res = r
			}
		}
		if res == nil {
			return nil, badSnapshot(snapInvalid, "unknown section %q", sec.Resource)
		}
		if _, dup := sn.objects[sec.Resource]; dup {
			return nil, badSnapshot(snapInvalid, "section %q twice", sec.Resource)
		}
		if sec.At == 0 || sec.From > sec.At {
			return nil, badSnapshot(snapInvalid, "section %s: resourceVersions [%d, %d]", sec.Resource, sec.From, sec.At)
		}
		var frame []byte
		if frame, rest, err = nextFrame(rest); err != nil {
			return nil, err
		}
		objs, err := c.decodeList(frame, res, node, sec)
		if err != nil {
			return nil, err
		}
		sn.objects[sec.Resource] = objs
	}
	if len(rest) != 0 {
		return nil, badSnapshot(snapCorrupt, "%d bytes after the last section", len(rest))
	}
	// With every section known and none twice, this leaves kube-proxy's
	// alone or all of them.
	for _, r := range servedResources {
		if _, ok := sn.objects[r.name]; !ok {
			return nil, badSnapshot(snapInvalid, "no section %q", r.name)
		}
	}
	return sn, nil
}

// decodeList decodes one section and checks every object: the list type of
// its resource (never anything else, such as a Secret), names, versions no
// newer than the section, no duplicates, and only this node's Node.
func (c snapshotCodec) decodeList(frame []byte, res *resource, node string, sec snapshotSection) (map[string]Object, error) {
	obj, _, err := c.codecs.UniversalDeserializer().Decode(frame, nil, nil)
	if err != nil {
		return nil, badSnapshot(snapCorrupt, "section %s: %v", sec.Resource, err)
	}
	want := res.newList(nil, "")
	if reflect.TypeOf(obj) != reflect.TypeOf(want) {
		return nil, badSnapshot(snapInvalid, "section %s holds a %T", sec.Resource, obj)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, badSnapshot(snapInvalid, "section %s: %v", sec.Resource, err)
	}
	if len(items) != sec.Objects {
		return nil, badSnapshot(snapInvalid, "section %s: %d objects, header says %d", sec.Resource, len(items), sec.Objects)
	}
	out := make(map[string]Object, len(items))
	for _, it := range items {
		o, ok := it.(Object)
		if !ok {
			return nil, badSnapshot(snapInvalid, "section %s: item %T", sec.Resource, it)
		}
		key := o.GetName()
		if o.GetName() == "" || (res.namespaced && o.GetNamespace() == "") || (!res.namespaced && o.GetNamespace() != "") {
			return nil, badSnapshot(snapInvalid, "section %s: object %q/%q", sec.Resource, o.GetNamespace(), o.GetName())
		}
		if res.namespaced {
			key = o.GetNamespace() + "/" + key
		}
		if res.name == ResourceNodes && key != node {
			return nil, badSnapshot(snapForeign, "holds Node %q, this is node %q", key, node)
		}
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil || rv > sec.At {
			return nil, badSnapshot(snapInvalid, "section %s: %s has resourceVersion %q beyond %d", sec.Resource, key, o.GetResourceVersion(), sec.At)
		}
		if _, dup := out[key]; dup {
			return nil, badSnapshot(snapInvalid, "section %s: %s twice", sec.Resource, key)
		}
		out[key] = o
	}
	return out, nil
}

// isSnapshotError reports whether err says why a snapshot is not used.
func isSnapshotError(err error) bool {
	var se *statefile.Error
	return errors.As(err, &se)
}
