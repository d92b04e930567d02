// Package snapshot is the on-disk snapshot of what application-grid-wrapper
// serves: its file format (a header and one protobuf List per resource,
// inside package statefile's framing) and its persistence in a state
// directory (Persister: load at start-up, rate-bounded rewrites).
//
// It knows nothing of the wrapper's stores or server: the wrapper describes
// the resources a snapshot may hold (Kind), hands the Persister a Source per
// resource to read, and decides itself what to do with a loaded Snapshot
// (seeding its stores, serving it, trusting it).
package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/framer"

	"github.com/servicegroup/servicegroup/internal/statefile"
)

// The on-disk snapshot: package statefile's framing (kind, version,
// checksum) around a payload of length-delimited frames (4-byte big-endian
// length, as apimachinery's framer writes protobuf watch streams):
//
//	header (JSON) | one protobuf List per section, in header order
//
// The header carries the node and upstream the snapshot belongs to and, per
// resource, the resourceVersions its served state was current for.
const (
	// maxBytes bounds what is read back: far above any real node's state.
	maxBytes = 1 << 30
)

// format is the snapshot's framing. The layout before the framing (header
// frame first, kind ApplicationGridWrapperSnapshot) is recognized and not
// read: the snapshot is rewritten within seconds of upstream answering, so
// only a restart in that window during an outage misses it.
var format = statefile.Format{Kind: "wrapper-snapshot", Version: 1, Previous: isUnframed}

// isUnframed recognizes the layout before statefile's framing: a
// length-delimited JSON header of kind ApplicationGridWrapperSnapshot.
func isUnframed(data []byte) bool {
	return len(data) > 4 && bytes.HasPrefix(data[4:], []byte(`{"kind":"ApplicationGridWrapperSnapshot"`))
}

// Object is what a section holds: any API object with metadata. The
// wrapper's stores hold the same type, so decoded objects are served as
// they are.
type Object interface {
	runtime.Object
	metav1.Object
}

// Header is the first frame of a snapshot.
type Header struct {
	NodeName  string    `json:"nodeName"`
	Upstream  string    `json:"upstream"`
	WrittenAt time.Time `json:"writtenAt"`
	Sections  []Section `json:"sections"`
}

// Section describes one resource's frame. The writing process served
// exactly these objects at every resourceVersion in [From, At]: From is its
// last change of this resource, At the clock when it was read.
type Section struct {
	Resource string `json:"resource"`
	From     uint64 `json:"from"`
	At       uint64 `json:"at"`
	Objects  int    `json:"objects"`
}

// Kind describes a resource a snapshot may hold a section of.
type Kind struct {
	// Name is the section's name in the header.
	Name         string
	GroupVersion schema.GroupVersion
	Namespaced   bool
	// OwnNodeOnly: the section may hold only the object named as the
	// snapshot's node (the Node: never another node's).
	OwnNodeOnly bool
	// NewList wraps objects of this kind in their List type at rv.
	NewList func(items []Object, rv string) runtime.Object
}

// Snapshot is a decoded, validated snapshot.
type Snapshot struct {
	Header Header
	// Objects are by section name, then keyed as the wrapper's stores key
	// them: "namespace/name", or the name of a cluster-scoped object.
	Objects map[string]map[string]Object
}

// Section is the header's section of resource (zero when there is none).
func (sn *Snapshot) Section(resource string) Section {
	for _, s := range sn.Header.Sections {
		if s.Resource == resource {
			return s
		}
	}
	return Section{}
}

// MaxVersion is the newest resourceVersion the snapshot's writer had handed
// out when it wrote it.
func (sn *Snapshot) MaxVersion() uint64 {
	var v uint64
	for _, sec := range sn.Header.Sections {
		v = max(v, sec.At)
	}
	return v
}

// Codec encodes lists as protobuf and decodes them strictly to its kinds'
// list types.
type Codec struct {
	// kinds are the sections a snapshot may hold, in order; it holds the
	// first n of them for an n in prefixes (a snapshot of an older
	// writer, without the later ones, still loads).
	kinds    []Kind
	prefixes []int
	codecs   serializer.CodecFactory
	proto    runtime.Serializer
}

// NewCodec reads and writes snapshots whose sections are all of kinds, or
// the first n of them for an n in olderPrefixes (what older writers wrote).
func NewCodec(kinds []Kind, olderPrefixes ...int) Codec {
	// A scheme of the kinds' list types alone: a frame of any other type
	// (a Secret's, say) is refused before anything of it is decoded, and
	// the decoder does not carry every API group client-go knows.
	s := runtime.NewScheme()
	for _, k := range kinds {
		s.AddKnownTypes(k.GroupVersion, k.NewList(nil, ""))
	}
	return Codec{
		kinds:    kinds,
		prefixes: append(slices.Clone(olderPrefixes), len(kinds)),
		codecs:   serializer.NewCodecFactory(s),
		proto:    protobuf.NewSerializer(s, s),
	}
}

// List is one section's content to encode.
type List struct {
	Section Section
	Kind    Kind
	Items   []Object
}

// Encode writes a snapshot's payload to w: h, with one section per list,
// then the lists.
func (c Codec) Encode(w io.Writer, h Header, lists []List) error {
	h.Sections = nil
	for _, l := range lists {
		h.Sections = append(h.Sections, l.Section)
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
		enc := c.codecs.EncoderForVersion(c.proto, l.Kind.GroupVersion)
		if err := enc.Encode(l.Kind.NewList(l.Items, strconv.FormatUint(l.Section.At, 10)), &buf); err != nil {
			return fmt.Errorf("encode %s: %w", l.Kind.Name, err)
		}
		if _, err := fw.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// bad is why a snapshot's payload is not used.
func bad(reason, msg string, args ...any) error {
	return statefile.Errorf(reason, msg, args...)
}

// nextFrame splits one length-delimited frame off b.
func nextFrame(b []byte) (frame, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, bad(statefile.ReasonTruncated, "%d bytes left, a frame needs at least 4", len(b))
	}
	n := uint64(binary.BigEndian.Uint32(b))
	if n > uint64(len(b)-4) {
		return nil, nil, bad(statefile.ReasonTruncated, "frame of %d bytes, %d left", n, len(b)-4)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// Decode checks and decodes a snapshot's payload written for node and
// upstream. Every problem is a *statefile.Error; nothing in data can make it
// panic.
func (c Codec) Decode(data []byte, node, upstream string) (*Snapshot, error) {
	hb, rest, err := nextFrame(data)
	if err != nil {
		return nil, err
	}
	var h Header
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, bad(statefile.ReasonCorrupt, "header: %v", err)
	}
	if h.NodeName != node {
		return nil, bad(statefile.ReasonForeign, "written for node %q, this is node %q", h.NodeName, node)
	}
	if h.Upstream != upstream {
		return nil, bad(statefile.ReasonForeign, "written for upstream %q, this wrapper's upstream is %q", h.Upstream, upstream)
	}
	if h.WrittenAt.IsZero() {
		return nil, bad(statefile.ReasonInvalid, "no writtenAt time")
	}
	if !slices.Contains(c.prefixes, len(h.Sections)) {
		return nil, bad(statefile.ReasonInvalid, "%d sections, want one of %v", len(h.Sections), c.prefixes)
	}
	sn := &Snapshot{Header: h, Objects: map[string]map[string]Object{}}
	for _, sec := range h.Sections {
		var kind *Kind
		for i := range c.kinds {
			if c.kinds[i].Name == sec.Resource {
				kind = &c.kinds[i]
			}
		}
		if kind == nil {
			return nil, bad(statefile.ReasonInvalid, "unknown section %q", sec.Resource)
		}
		if _, dup := sn.Objects[sec.Resource]; dup {
			return nil, bad(statefile.ReasonInvalid, "section %q twice", sec.Resource)
		}
		if sec.At == 0 || sec.From > sec.At {
			return nil, bad(statefile.ReasonInvalid, "section %s: resourceVersions [%d, %d]", sec.Resource, sec.From, sec.At)
		}
		var frame []byte
		if frame, rest, err = nextFrame(rest); err != nil {
			return nil, err
		}
		objs, err := c.decodeList(frame, kind, node, sec)
		if err != nil {
			return nil, err
		}
		sn.Objects[sec.Resource] = objs
	}
	if len(rest) != 0 {
		return nil, bad(statefile.ReasonCorrupt, "%d bytes after the last section", len(rest))
	}
	// With every section known and none twice, this leaves the first ones
	// of kinds.
	for _, k := range c.kinds[:len(h.Sections)] {
		if _, ok := sn.Objects[k.Name]; !ok {
			return nil, bad(statefile.ReasonInvalid, "no section %q", k.Name)
		}
	}
	return sn, nil
}

// decodeList decodes one section and checks every object: the list type of
// its kind (never anything else, such as a Secret), names, versions no
// newer than the section, no duplicates, and only this node's Node.
func (c Codec) decodeList(frame []byte, kind *Kind, node string, sec Section) (map[string]Object, error) {
	obj, gvk, err := c.codecs.UniversalDeserializer().Decode(frame, nil, nil)
	if runtime.IsNotRegisteredError(err) && gvk != nil {
		return nil, bad(statefile.ReasonInvalid, "section %s holds a %s", sec.Resource, gvk.Kind)
	}
	if err != nil {
		return nil, bad(statefile.ReasonCorrupt, "section %s: %v", sec.Resource, err)
	}
	want := kind.NewList(nil, "")
	if reflect.TypeOf(obj) != reflect.TypeOf(want) {
		return nil, bad(statefile.ReasonInvalid, "section %s holds a %T", sec.Resource, obj)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil, bad(statefile.ReasonInvalid, "section %s: %v", sec.Resource, err)
	}
	if len(items) != sec.Objects {
		return nil, bad(statefile.ReasonInvalid, "section %s: %d objects, header says %d", sec.Resource, len(items), sec.Objects)
	}
	out := make(map[string]Object, len(items))
	for _, it := range items {
		o, ok := it.(Object)
		if !ok {
			return nil, bad(statefile.ReasonInvalid, "section %s: item %T", sec.Resource, it)
		}
		key := o.GetName()
		if o.GetName() == "" || (kind.Namespaced && o.GetNamespace() == "") || (!kind.Namespaced && o.GetNamespace() != "") {
			return nil, bad(statefile.ReasonInvalid, "section %s: object %q/%q", sec.Resource, o.GetNamespace(), o.GetName())
		}
		if kind.Namespaced {
			key = o.GetNamespace() + "/" + key
		}
		if kind.OwnNodeOnly && key != node {
			return nil, bad(statefile.ReasonForeign, "holds Node %q, this is node %q", key, node)
		}
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil || rv > sec.At {
			return nil, bad(statefile.ReasonInvalid, "section %s: %s has resourceVersion %q beyond %d", sec.Resource, key, o.GetResourceVersion(), sec.At)
		}
		if _, dup := out[key]; dup {
			return nil, bad(statefile.ReasonInvalid, "section %s: %s twice", sec.Resource, key)
		}
		out[key] = o
	}
	return out, nil
}
