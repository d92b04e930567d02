package gridhosts

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

// snapshotFormat is the snapshot's framing. The layout before it (magic
// "GHSNAP\r\n") is recognized and not read: the snapshot is rewritten as
// soon as the informers sync, so only a restart in that window during an
// outage misses it.
var snapshotFormat = statefile.Format{Kind: "gridhosts-snapshot", Version: 1,
	Previous: func(data []byte) bool { return bytes.HasPrefix(data, []byte("GHSNAP\r\n")) }}

// snapOwner identifies whom a snapshot belongs to: the node (node mode),
// the mode, and the zones of the gridhosts block. Another owner's snapshot
// is never served.
type snapOwner struct {
	Node    string
	Clients bool
	Zones   []string
}

func (o snapOwner) String() string {
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

func (o snapOwner) equal(p snapOwner) bool {
	return o.Node == p.Node && o.Clients == p.Clients && slices.Equal(o.Zones, p.Zones)
}

type snapHeader struct {
	Owner   snapOwner
	Written time.Time
	// Identity ties the snapshot to its cluster (snapshottrust.Identity);
	// zero in snapshots of earlier builds.
	Identity snapshottrust.Identity
}

type snapKV struct{ Key, Value string }

type snapMeta struct {
	Namespace, Name string
	UID             types.UID
}

type snapGrid struct {
	Meta snapMeta
	Key  string
}

type snapSet struct {
	Meta            snapMeta
	Owner           gridname.ControllerRef
	HasOwner        bool
	GridSelector    string
	HasGridSelector bool
	GridKey         gridname.GridKeyRef
	ServiceName     string
	NodeSelector    []snapKV
	Terminating     bool
}

type snapPod struct {
	Meta        snapMeta
	Owner       gridname.ControllerRef
	HasOwner    bool
	Created     time.Time
	NodeName    string
	IPs         []netip.Addr
	Terminating bool
	Finished    bool
}

type snapService struct {
	Meta     snapMeta
	GridKey  gridname.GridKeyRef
	Headless bool
	Keys     []string
}

type snapNode struct {
	Meta        snapMeta
	Labels      []snapKV
	InternalIPs []netip.Addr
}

type snapSlice struct {
	Meta      snapMeta
	Service   string
	Ports     []slicePort
	Endpoints []sliceEndpoint
}

// snapBody is the index's content.
type snapBody struct {
	Grids    []snapGrid
	Sets     []snapSet
	Pods     []snapPod
	Services []snapService
	Nodes    []snapNode
	Slices   []snapSlice
}

func metaOf(t *tiny, uid types.UID) snapMeta {
	return snapMeta{Namespace: t.Namespace, Name: t.Name, UID: uid}
}

func (o *podObj) snapMeta() snapMeta { return snapMeta{Namespace: o.Namespace(), Name: o.Name()} }

func (m snapMeta) tiny() tiny {
	t := tiny{}
	t.Namespace, t.Name = m.Namespace, m.Name
	return t
}

func kvsOf(m map[string]string) []snapKV {
	if len(m) == 0 {
		return nil
	}
	out := make([]snapKV, 0, len(m))
	for k, v := range m {
		out = append(out, snapKV{k, v})
	}
	slices.SortFunc(out, func(a, b snapKV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func mapOf(kvs []snapKV) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// sortedValues returns m's objects sorted by namespace and name: pointers
// are sorted, not the (larger) records, so sorting stays cheap.
func sortedValues[K comparable, T any](m map[K]*T, meta func(*T) snapMeta) []*T {
	out := make([]*T, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *T) int {
		ma, mb := meta(a), meta(b)
		return cmp.Or(strings.Compare(ma.Namespace, mb.Namespace), strings.Compare(ma.Name, mb.Name))
	})
	return out
}

// bodyOf copies the index's content into a body. It holds the read lock
// only while collecting pointers; the small objects are never changed in
// place.
func bodyOf(x *Index) *snapBody {
	x.mu.RLock()
	grids := sortedValues(x.grids, func(o *gridObj) snapMeta { return metaOf(&o.tiny, "") })
	sets := sortedValues(x.sets, func(o *setObj) snapMeta { return metaOf(&o.tiny, "") })
	pods := sortedValues(x.pods, func(o *podObj) snapMeta { return o.snapMeta() })
	services := sortedValues(x.services, func(o *svcObj) snapMeta { return metaOf(&o.tiny, "") })
	nodes := sortedValues(x.nodes, func(o *nodeObj) snapMeta { return metaOf(&o.tiny, "") })
	slcs := sortedValues(x.slices, func(o *sliceObj) snapMeta { return metaOf(&o.tiny, "") })
	x.mu.RUnlock()
	b := &snapBody{
		Grids:    make([]snapGrid, 0, len(grids)),
		Sets:     make([]snapSet, 0, len(sets)),
		Pods:     make([]snapPod, 0, len(pods)),
		Services: make([]snapService, 0, len(services)),
		Nodes:    make([]snapNode, 0, len(nodes)),
		Slices:   make([]snapSlice, 0, len(slcs)),
	}
	for _, o := range grids {
		b.Grids = append(b.Grids, snapGrid{Meta: metaOf(&o.tiny, o.Grid.UID), Key: o.Key})
	}
	for _, o := range sets {
		b.Sets = append(b.Sets, snapSet{Meta: metaOf(&o.tiny, o.StatefulSet.UID), Owner: o.Owner, HasOwner: o.HasOwner,
			GridSelector: o.GridSelector, HasGridSelector: o.HasGridSelector, GridKey: o.GridKey,
			ServiceName: o.ServiceName, NodeSelector: kvsOf(o.NodeSelector), Terminating: o.Terminating})
	}
	for _, o := range pods {
		b.Pods = append(b.Pods, snapPod{Meta: o.snapMeta(), Owner: o.Owner, HasOwner: o.HasOwner,
			Created: o.createdAt().UTC(), NodeName: o.NodeName, IPs: o.IPs, Terminating: o.Terminating, Finished: o.Finished})
	}
	for _, o := range services {
		b.Services = append(b.Services, snapService{Meta: metaOf(&o.tiny, o.UID), GridKey: o.GridKey, Headless: o.Headless, Keys: o.Keys})
	}
	for _, o := range nodes {
		b.Nodes = append(b.Nodes, snapNode{Meta: metaOf(&o.tiny, o.UID), Labels: kvsOf(o.Labels), InternalIPs: o.InternalIPs})
	}
	for _, o := range slcs {
		b.Slices = append(b.Slices, snapSlice{Meta: metaOf(&o.tiny, o.UID), Service: o.Service, Ports: o.Ports, Endpoints: o.Endpoints})
	}
	return b
}

// index builds a fresh index from the body through the same Upsert the
// informers use, so snapshot answers follow the same consistency checks.
func (b *snapBody) index() *Index {
	x := newIndexSized(len(b.Grids), len(b.Sets), len(b.Pods), len(b.Services), len(b.Nodes), len(b.Slices))
	for _, o := range b.Grids {
		x.Upsert(&gridObj{tiny: o.Meta.tiny(), Grid: gridname.Grid{Name: o.Meta.Name, UID: o.Meta.UID,
			Key: o.Key, KeyLabel: superedgev1.GridUniqKeyLabelValue(o.Key)}})
	}
	for _, o := range b.Sets {
		x.Upsert(&setObj{tiny: o.Meta.tiny(), StatefulSet: gridname.StatefulSet{Name: o.Meta.Name, UID: o.Meta.UID,
			Owner: o.Owner, HasOwner: o.HasOwner, GridSelector: o.GridSelector,
			HasGridSelector: o.HasGridSelector, GridKey: o.GridKey, ServiceName: o.ServiceName,
			NodeSelector: mapOf(o.NodeSelector), Terminating: o.Terminating}})
	}
	for _, o := range b.Pods {
		p := newPodObj(o.Meta.Namespace, o.Meta.Name)
		p.Pod = gridname.Pod{Owner: o.Owner, HasOwner: o.HasOwner, IPs: o.IPs, Terminating: o.Terminating, Finished: o.Finished}
		p.created, p.NodeName = unixSeconds(o.Created.Unix()), o.NodeName
		x.Upsert(p)
	}
	for _, o := range b.Services {
		x.Upsert(&svcObj{tiny: o.Meta.tiny(), uidMeta: uidMeta{o.Meta.UID}, Service: gridname.Service{GridKey: o.GridKey}, Headless: o.Headless, Keys: o.Keys})
	}
	for _, o := range b.Nodes {
		x.Upsert(&nodeObj{tiny: o.Meta.tiny(), uidMeta: uidMeta{o.Meta.UID}, Labels: mapOf(o.Labels), InternalIPs: o.InternalIPs})
	}
	for _, o := range b.Slices {
		x.Upsert(&sliceObj{tiny: o.Meta.tiny(), uidMeta: uidMeta{o.Meta.UID}, Service: o.Service, Ports: o.Ports, Endpoints: o.Endpoints})
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
func encodePayload(w io.Writer, h snapHeader, body []byte) error {
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
func decodePayload(data []byte) (snapHeader, *snapBody, error) {
	bad := func(reason, format string, args ...any) (snapHeader, *snapBody, error) {
		return snapHeader{}, nil, statefile.Errorf(reason, format, args...)
	}
	if len(data) < 4 {
		return bad(statefile.ReasonTruncated, "%d bytes, no header length", len(data))
	}
	hlen := uint64(binary.BigEndian.Uint32(data))
	if uint64(len(data)-4) < hlen {
		return bad(statefile.ReasonTruncated, "a header of %d bytes announced, %d left", hlen, len(data)-4)
	}
	var h snapHeader
	if err := gob.NewDecoder(bytes.NewReader(data[4 : 4+hlen])).Decode(&h); err != nil {
		return bad(statefile.ReasonCorrupt, "undecodable header: %v", err)
	}
	b := &snapBody{}
	if err := gob.NewDecoder(bytes.NewReader(data[4+hlen:])).Decode(b); err != nil {
		return bad(statefile.ReasonCorrupt, "undecodable body: %v", err)
	}
	return h, b, nil
}

// readSnapshot reads and checks the snapshot at path for owner. Every error
// is a *statefile.Error naming path.
func readSnapshot(path string, owner snapOwner) (snapHeader, *snapBody, error) {
	data, err := statefile.ReadFramed(path, snapshotFormat, maxSnapshotSize)
	if err != nil {
		return snapHeader{}, nil, err
	}
	h, b, err := decodePayload(data)
	if err != nil {
		err.(*statefile.Error).Path = path
		return h, nil, err
	}
	if !h.Owner.equal(owner) {
		return h, nil, &statefile.Error{Path: path, Reason: statefile.ReasonForeign,
			Err: fmt.Errorf("belongs to another owner (%s; this is %s)", h.Owner, owner)}
	}
	return h, b, nil
}
