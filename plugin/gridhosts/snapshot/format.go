// Package snapshot keeps gridhosts' index on disk, so a CoreDNS restarted
// while the apiserver is away can answer grid names: the file format
// (format.go), its writer (writer.go) and the snapshot's identity
// (identity.go). When one read at start-up is answered from is package
// snapshottrust's Life, the wrapper's rule too; the plugin decides it.
package snapshot

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/gridname"
	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/internal/statefile"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// The snapshot file keeps the facts the index is built from (the small
// objects of objects.go, without resourceVersions or timestamps of receipt),
// so a restarted CoreDNS can answer grid names while the apiserver is away.
// Its own record types decouple the file format from the in-memory types:
// a change to either needs a new snapshotVersion.
//
// The file is package statefile's framing (kind, version, checksum) around
// a payload of (integers big-endian):
//
//	uint32 header length | header (gob) | body (gob)
//
// The header names the owner (node, mode, zones) and the write time; the
// body holds the objects, sorted, with maps as sorted pairs, so that equal
// content gives equal bytes and an unchanged index is not rewritten.
const (
	// maxSnapshotSize bounds what a load reads into memory: far above any
	// real index (10k grid pods are about 1 MB).
	maxSnapshotSize = 256 << 20
)

// Format is the snapshot's framing. The layout before it (magic
// "GHSNAP\r\n") is recognized and not read: the snapshot is rewritten as
// soon as the informers sync, so only a restart in that window during an
// outage misses it.
var Format = statefile.Format{Kind: "gridhosts-snapshot", Version: 1,
	Previous: func(data []byte) bool { return bytes.HasPrefix(data, []byte("GHSNAP\r\n")) }}

// Owner identifies whom a snapshot belongs to: the node (node mode),
// the mode, and the zones of the gridhosts block. Another owner's snapshot
// is never served.
type Owner struct {
	Node    string
	Clients bool
	Zones   []string
}

func (o Owner) String() string {
	mode := "node mode"
	if o.Clients {
		mode = "clients mode"
	}
	node := o.Node
	if node == "" {
		node = "(none)"
	}
	return fmt.Sprintf("node %s, %s, zones %s", node, mode, strings.Join(o.Zones, " "))
}

// Equal: o and p are the same owner.
func (o Owner) Equal(p Owner) bool {
	return o.Node == p.Node && o.Clients == p.Clients && slices.Equal(o.Zones, p.Zones)
}

// Header is who a snapshot belongs to and when its data was last known
// current.
type Header struct {
	Owner   Owner
	Written time.Time
	// Identity ties the snapshot to its cluster (snapshottrust.Identity);
	// zero in snapshots of earlier builds.
	Identity snapshottrust.Identity
}

// KV is one entry of a map, which a snapshot keeps as sorted pairs.
type KV struct{ Key, Value string }

// Meta is a record's object.
type Meta struct {
	Namespace, Name string
	UID             types.UID
}

// Grid is a StatefulSetGrid's record (index.GridObj).
type Grid struct {
	Meta Meta
	Key  string
}

// StatefulSet is a StatefulSet's record (index.SetObj).
type StatefulSet struct {
	Meta            Meta
	Owner           gridname.ControllerRef
	HasOwner        bool
	GridSelector    string
	HasGridSelector bool
	GridKey         gridname.GridKeyRef
	ServiceName     string
	NodeSelector    []KV
	Terminating     bool
}

// Pod is a pod's record (index.PodObj).
type Pod struct {
	Meta        Meta
	Owner       gridname.ControllerRef
	HasOwner    bool
	Created     time.Time
	NodeName    string
	IPs         []netip.Addr
	Terminating bool
	Finished    bool
}

// Service is a Service's record (index.ServiceObj).
type Service struct {
	Meta     Meta
	GridKey  gridname.GridKeyRef
	Headless bool
	Keys     []string
}

// Node is a Node's record (index.NodeObj).
type Node struct {
	Meta        Meta
	Labels      []KV
	InternalIPs []netip.Addr
}

// EndpointSlice is an EndpointSlice's record (index.SliceObj).
type EndpointSlice struct {
	Meta      Meta
	Service   string
	Ports     []index.SlicePort
	Endpoints []index.SliceEndpoint
}

// Body is the index's content.
type Body struct {
	Grids    []Grid
	Sets     []StatefulSet
	Pods     []Pod
	Services []Service
	Nodes    []Node
	Slices   []EndpointSlice
}

func metaOf(t *index.Meta, uid types.UID) Meta {
	return Meta{Namespace: t.Namespace, Name: t.Name, UID: uid}
}

func podMeta(o *index.PodObj) Meta { return Meta{Namespace: o.Namespace(), Name: o.Name()} }

func kvsOf(m map[string]string) []KV {
	if len(m) == 0 {
		return nil
	}
	out := make([]KV, 0, len(m))
	for k, v := range m {
		out = append(out, KV{k, v})
	}
	slices.SortFunc(out, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func mapOf(kvs []KV) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// sortedByName sorts objects by namespace and name: pointers are sorted,
// not the (larger) records, so sorting stays cheap.
func sortedByName[T any](objs []*T, meta func(*T) Meta) []*T {
	slices.SortFunc(objs, func(a, b *T) int {
		ma, mb := meta(a), meta(b)
		return cmp.Or(strings.Compare(ma.Namespace, mb.Namespace), strings.Compare(ma.Name, mb.Name))
	})
	return objs
}

// bodyOf copies the index's content into a body. The index's read lock is
// held only while its objects' pointers are collected (index.Contents); the
// small objects are never changed in place.
func bodyOf(x *index.Index) *Body {
	c := x.Contents()
	grids := sortedByName(c.Grids, func(o *index.GridObj) Meta { return metaOf(&o.Meta, "") })
	sets := sortedByName(c.StatefulSets, func(o *index.SetObj) Meta { return metaOf(&o.Meta, "") })
	pods := sortedByName(c.Pods, podMeta)
	services := sortedByName(c.Services, func(o *index.ServiceObj) Meta { return metaOf(&o.Meta, "") })
	nodes := sortedByName(c.Nodes, func(o *index.NodeObj) Meta { return metaOf(&o.Meta, "") })
	slcs := sortedByName(c.EndpointSlices, func(o *index.SliceObj) Meta { return metaOf(&o.Meta, "") })
	b := &Body{
		Grids:    make([]Grid, 0, len(grids)),
		Sets:     make([]StatefulSet, 0, len(sets)),
		Pods:     make([]Pod, 0, len(pods)),
		Services: make([]Service, 0, len(services)),
		Nodes:    make([]Node, 0, len(nodes)),
		Slices:   make([]EndpointSlice, 0, len(slcs)),
	}
	for _, o := range grids {
		b.Grids = append(b.Grids, Grid{Meta: metaOf(&o.Meta, o.Grid.UID), Key: o.Key})
	}
	for _, o := range sets {
		b.Sets = append(b.Sets, StatefulSet{Meta: metaOf(&o.Meta, o.StatefulSet.UID), Owner: o.Owner, HasOwner: o.HasOwner,
			GridSelector: o.GridSelector, HasGridSelector: o.HasGridSelector, GridKey: o.GridKey,
			ServiceName: o.ServiceName, NodeSelector: kvsOf(o.NodeSelector), Terminating: o.Terminating})
	}
	for _, o := range pods {
		b.Pods = append(b.Pods, Pod{Meta: podMeta(o), Owner: o.Owner, HasOwner: o.HasOwner,
			Created: o.Created().UTC(), NodeName: o.NodeName, IPs: o.IPs, Terminating: o.Terminating, Finished: o.Finished})
	}
	for _, o := range services {
		b.Services = append(b.Services, Service{Meta: metaOf(&o.Meta, o.UID), GridKey: o.GridKey, Headless: o.Headless, Keys: o.Keys})
	}
	for _, o := range nodes {
		b.Nodes = append(b.Nodes, Node{Meta: metaOf(&o.Meta, o.UID), Labels: kvsOf(o.Labels), InternalIPs: o.InternalIPs})
	}
	for _, o := range slcs {
		b.Slices = append(b.Slices, EndpointSlice{Meta: metaOf(&o.Meta, o.UID), Service: o.Service, Ports: o.Ports, Endpoints: o.Endpoints})
	}
	return b
}

// Index builds a fresh index in node mode nodeMode from the body through
// the same Upsert the informers use, so snapshot answers follow the same
// consistency checks.
func (b *Body) Index(nodeMode bool) *index.Index {
	x := index.New(index.Options{NodeMode: nodeMode, Room: index.Counts{Grids: len(b.Grids), StatefulSets: len(b.Sets),
		Pods: len(b.Pods), Services: len(b.Services), Nodes: len(b.Nodes), EndpointSlices: len(b.Slices)}})
	for _, o := range b.Grids {
		x.Upsert(&index.GridObj{Meta: index.MetaOf(o.Meta.Namespace, o.Meta.Name), Grid: gridname.Grid{Name: o.Meta.Name, UID: o.Meta.UID,
			Key: o.Key, KeyLabel: superedgev1.GridUniqKeyLabelValue(o.Key)}})
	}
	for _, o := range b.Sets {
		x.Upsert(&index.SetObj{Meta: index.MetaOf(o.Meta.Namespace, o.Meta.Name), StatefulSet: gridname.StatefulSet{Name: o.Meta.Name, UID: o.Meta.UID,
			Owner: o.Owner, HasOwner: o.HasOwner, GridSelector: o.GridSelector,
			HasGridSelector: o.HasGridSelector, GridKey: o.GridKey, ServiceName: o.ServiceName,
			NodeSelector: mapOf(o.NodeSelector), Terminating: o.Terminating}})
	}
	for _, o := range b.Pods {
		p := index.NewPodObj(o.Meta.Namespace, o.Meta.Name, o.Created)
		p.Pod = gridname.Pod{Owner: o.Owner, HasOwner: o.HasOwner, IPs: o.IPs, Terminating: o.Terminating, Finished: o.Finished}
		p.NodeName = o.NodeName
		x.Upsert(p)
	}
	for _, o := range b.Services {
		s := &index.ServiceObj{Meta: index.MetaOf(o.Meta.Namespace, o.Meta.Name), Service: gridname.Service{GridKey: o.GridKey}, Headless: o.Headless, Keys: o.Keys}
		s.UID = o.Meta.UID
		x.Upsert(s)
	}
	for _, o := range b.Nodes {
		n := &index.NodeObj{Meta: index.MetaOf(o.Meta.Namespace, o.Meta.Name), Labels: mapOf(o.Labels), InternalIPs: o.InternalIPs}
		n.UID = o.Meta.UID
		x.Upsert(n)
	}
	for _, o := range b.Slices {
		s := &index.SliceObj{Meta: index.MetaOf(o.Meta.Namespace, o.Meta.Name), Service: o.Service, Ports: o.Ports, Endpoints: o.Endpoints}
		s.UID = o.Meta.UID
		x.Upsert(s)
	}
	return x
}

func gobBytes(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodePayload writes one snapshot's payload from a header and an encoded
// body.
func encodePayload(w io.Writer, h Header, body []byte) error {
	hb, err := gobBytes(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, uint32(len(hb)))); err != nil {
		return err
	}
	if _, err := w.Write(hb); err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// decodePayload decodes one snapshot's payload (its framing already
// checked). Every error is a *statefile.Error.
func decodePayload(data []byte) (Header, *Body, error) {
	bad := func(reason, format string, args ...any) (Header, *Body, error) {
		return Header{}, nil, statefile.Errorf(reason, format, args...)
	}
	if len(data) < 4 {
		return bad(statefile.ReasonTruncated, "%d bytes, no header length", len(data))
	}
	hlen := uint64(binary.BigEndian.Uint32(data))
	if uint64(len(data)-4) < hlen {
		return bad(statefile.ReasonTruncated, "a header of %d bytes announced, %d left", hlen, len(data)-4)
	}
	var h Header
	if err := gob.NewDecoder(bytes.NewReader(data[4 : 4+hlen])).Decode(&h); err != nil {
		return bad(statefile.ReasonCorrupt, "undecodable header: %v", err)
	}
	b := &Body{}
	if err := gob.NewDecoder(bytes.NewReader(data[4+hlen:])).Decode(b); err != nil {
		return bad(statefile.ReasonCorrupt, "undecodable body: %v", err)
	}
	return h, b, nil
}

// Read reads and checks the snapshot at path for owner. Every error
// is a *statefile.Error naming path.
func Read(path string, owner Owner) (Header, *Body, error) {
	data, err := statefile.ReadFramed(path, Format, maxSnapshotSize)
	if err != nil {
		return Header{}, nil, err
	}
	h, b, err := decodePayload(data)
	if err != nil {
		err.(*statefile.Error).Path = path
		return h, nil, err
	}
	if !h.Owner.Equal(owner) {
		return h, nil, &statefile.Error{Path: path, Reason: statefile.ReasonForeign,
			Err: fmt.Errorf("belongs to another owner (%s; this is %s)", h.Owner, owner)}
	}
	return h, b, nil
}
