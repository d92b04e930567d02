package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/servicegroup/servicegroup/internal/statefile"
)

// goodSnapshot writes a valid snapshot of fill's state and returns its bytes.
func goodSnapshot(t testing.TB, dir string) []byte {
	t.Helper()
	p, st := newTestPersister(dir, 1000)
	fill(st)
	p.Write(logr.Discard(), time.Now())
	b, err := os.ReadFile(p.Path())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadSnapshotsIgnored: every kind of bad snapshot is ignored with exactly
// one log line naming the reason, never a panic and never served.
func TestBadSnapshotsIgnored(t *testing.T) {
	good := goodSnapshot(t, t.TempDir())
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	reframe := func(format statefile.Format, mut func(h *Header, lists []List) []List) []byte {
		dir := t.TempDir()
		p, st := newTestPersister(dir, 1000)
		fill(st)
		var lists []List
		for _, src := range p.Sources {
			objs, from, at := src.State()
			lists = append(lists, List{Kind: src.Kind, Items: objs, Section: Section{Resource: src.Kind.Name, From: from, At: at, Objects: len(objs)}})
		}
		h := Header{NodeName: testNode, Upstream: testUpstream, WrittenAt: time.Now()}
		lists = mut(&h, lists)
		// Written by a codec of whatever kinds the case put in (a writer
		// of ours knows only its own), read back by the persister's.
		var kinds []Kind
		for _, l := range lists {
			kinds = append(kinds, l.Kind)
		}
		writer := NewCodec(kinds)
		if _, err := statefile.WriteFramed(dir, fileName, format, func(w io.Writer) error { return writer.Encode(w, h, lists) }); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p.Path())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	reencode := func(mut func(h *Header, lists []List) []List) []byte {
		return reframe(format, mut)
	}
	newer := format
	newer.Version++
	// The layout before statefile's framing: a JSON header frame first,
	// the SHA-256 frame last.
	unframed := []byte(`{"kind":"ApplicationGridWrapperSnapshot","formatVersion":1,"nodeName":"node0"}`)
	unframed = append(binary.BigEndian.AppendUint32(nil, uint32(len(unframed))), unframed...)
	unframed = append(unframed, 0, 0, 0, 32)
	unframed = append(unframed, make([]byte, 32)...)
	secretList := servicesKind
	secretList.NewList = func(items []Object, rv string) runtime.Object {
		return &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}}}
	}
	cases := []struct {
		name, reason string
		data         []byte // nil: no file
		dir          bool   // a directory where the file should be
		fifo         bool   // a named pipe there (opening it would block)
		maxAge       time.Duration
	}{
		{name: "missing", reason: "No snapshot"},
		{name: "empty", data: []byte{}, reason: statefile.ReasonEmpty},
		{name: "truncated to 3 bytes", data: good[:3], reason: statefile.ReasonTruncated},
		{name: "truncated to half", data: good[:len(good)/2], reason: statefile.ReasonTruncated},
		{name: "truncated by one byte", data: good[:len(good)-1], reason: statefile.ReasonTruncated},
		{name: "one byte more", data: append(bytes.Clone(good), 0), reason: statefile.ReasonTruncated},
		{name: "the layout before the framing", data: unframed, reason: statefile.ReasonPreviousFormat},
		{name: "corrupt header", data: flip(10), reason: statefile.ReasonCorrupt},
		{name: "corrupt body", data: flip(len(good) / 2), reason: statefile.ReasonCorrupt},
		{name: "corrupt checksum", data: flip(len(good) - 1), reason: statefile.ReasonCorrupt},
		{name: "not a snapshot", data: bytes.Repeat([]byte("kube"), 100), reason: statefile.ReasonUnknownFormat},
		{name: "wrong version", reason: statefile.ReasonVersion, data: reframe(newer, func(_ *Header, l []List) []List {
			return l
		})},
		{name: "foreign node", reason: statefile.ReasonForeign, data: reencode(func(h *Header, l []List) []List {
			h.NodeName = "node7"
			return l
		})},
		{name: "foreign upstream", reason: statefile.ReasonForeign, data: reencode(func(h *Header, l []List) []List {
			h.Upstream = "https://10.0.0.1:6443"
			return l
		})},
		{name: "foreign Node object", reason: statefile.ReasonForeign, data: reencode(func(_ *Header, l []List) []List {
			l[1].Items = []Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node7", ResourceVersion: "1"}}}
			return l
		})},
		{name: "a Secret in a section", reason: statefile.ReasonInvalid, data: reencode(func(_ *Header, l []List) []List {
			l[0].Kind, l[0].Section.Objects = secretList, 1
			return l
		})},
		{name: "section missing", reason: statefile.ReasonInvalid, data: reencode(func(_ *Header, l []List) []List {
			return l[:1]
		})},
		{name: "count mismatch", reason: statefile.ReasonInvalid, data: reencode(func(_ *Header, l []List) []List {
			l[1].Section.Objects++
			return l
		})},
		{name: "object newer than its section", reason: statefile.ReasonInvalid, data: reencode(func(_ *Header, l []List) []List {
			l[0].Section.At = 1
			l[0].Section.From = 1
			return l
		})},
		{name: "a directory", dir: true, reason: statefile.ReasonNotRegular},
		{name: "a FIFO", fifo: true, reason: statefile.ReasonNotRegular},
		{name: "too old", data: good, maxAge: time.Nanosecond, reason: "too-old"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p, _ := newTestPersister(dir, 5000)
			p.MaxAge = c.maxAge
			switch {
			case c.dir:
				if err := os.Mkdir(p.Path(), 0o700); err != nil {
					t.Fatal(err)
				}
			case c.fifo:
				if err := syscall.Mkfifo(p.Path(), 0o600); err != nil {
					t.Fatal(err)
				}
			case c.data != nil:
				if err := os.WriteFile(p.Path(), c.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs lineLogger
			if sn := p.Load(logs.logger()); sn != nil {
				t.Fatalf("bad snapshot loaded: %+v", sn.Header)
			}
			lines := logs.all()
			if len(lines) != 1 || !strings.Contains(lines[0], c.reason) {
				t.Fatalf("log lines %q, want one naming %q", lines, c.reason)
			}
		})
	}
}

func FuzzSnapshotDecode(f *testing.F) {
	good, err := statefile.Unframe(goodSnapshot(f, f.TempDir()), format)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 32})
	codec := NewCodec(testKinds)
	f.Fuzz(func(t *testing.T, data []byte) {
		sn, err := codec.Decode(data, testNode, testUpstream)
		if err != nil {
			if se := (*statefile.Error)(nil); !errors.As(err, &se) {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		for _, sec := range sn.Header.Sections {
			if len(sn.Objects[sec.Resource]) != sec.Objects {
				t.Fatalf("section %+v with %d objects", sec, len(sn.Objects[sec.Resource]))
			}
		}
	})
}
