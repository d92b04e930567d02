package statefile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
)

// The framing of every snapshot file (integers big-endian):
//
//	magic "SGSTATE\n" | uint32 version | uint16 kind length | kind
//	| payload | uint64 payload length | SHA-256 of every byte before it
//
// The kind names what the payload is ("wrapper-snapshot"), the version its
// layout; a reader uses only its own kind and version. The length and the
// checksum come last so a payload is written as it is encoded, never held
// in memory whole.
const magic = "SGSTATE\n"

// trailerSize is the payload length and the checksum.
const trailerSize = 8 + sha256.Size

// Format is what a framed file holds.
type Format struct {
	Kind    string
	Version uint32
	// Previous recognizes the kind's earlier, unframed layout (nil: it had
	// none), so such a file is refused as ReasonPreviousFormat rather than
	// as unknown.
	Previous func(data []byte) bool
}

func (f Format) header() []byte {
	h := make([]byte, 0, len(magic)+4+2+len(f.Kind))
	h = append(h, magic...)
	h = binary.BigEndian.AppendUint32(h, f.Version)
	h = binary.BigEndian.AppendUint16(h, uint16(len(f.Kind)))
	return append(h, f.Kind...)
}

// WriteFramed replaces dir/name atomically (WriteAtomic) with f's framing
// around what write produces. It returns the bytes written.
func WriteFramed(dir, name string, f Format, write func(io.Writer) error) (int64, error) {
	return WriteAtomic(dir, name, func(w io.Writer) error {
		sum := sha256.New()
		out := io.MultiWriter(w, sum)
		if _, err := out.Write(f.header()); err != nil {
			return err
		}
		payload := &countingWriter{w: out}
		if err := write(payload); err != nil {
			return err
		}
		if _, err := out.Write(binary.BigEndian.AppendUint64(nil, uint64(payload.n))); err != nil {
			return err
		}
		_, err := w.Write(sum.Sum(nil))
		return err
	})
}

// ReadFramed reads path (Read) and returns its payload when it is a framed
// file of f's kind and version, whole and unchanged. Every error is an
// *Error.
func ReadFramed(path string, f Format, limit int64) ([]byte, error) {
	data, err := Read(path, limit)
	if err != nil {
		return nil, err
	}
	payload, err := Unframe(data, f)
	if err != nil {
		err.(*Error).Path = path
	}
	return payload, err
}

// Unframe checks data's framing against f and returns the payload. Each way
// the framing can be wrong has its reason; the kind and version are only
// compared once the checksum matched.
func Unframe(data []byte, f Format) ([]byte, error) {
	switch {
	case len(data) == 0:
		return nil, Errorf(ReasonEmpty, "the file is empty")
	case len(data) < len(magic) && bytes.HasPrefix([]byte(magic), data):
		return nil, Errorf(ReasonTruncated, "%d bytes", len(data))
	case !bytes.HasPrefix(data, []byte(magic)):
		if f.Previous != nil && f.Previous(data) {
			return nil, Errorf(ReasonPreviousFormat, "written by an earlier build in a layout this one no longer reads")
		}
		return nil, Errorf(ReasonUnknownFormat, "not a state file (no magic bytes)")
	}
	const fixed = len(magic) + 4 + 2
	if len(data) < fixed {
		return nil, Errorf(ReasonTruncated, "%d bytes", len(data))
	}
	kindLen := int(binary.BigEndian.Uint16(data[len(magic)+4:]))
	headerLen := fixed + kindLen
	if len(data) < headerLen+trailerSize {
		return nil, Errorf(ReasonTruncated, "%d bytes, shorter than the header and trailer", len(data))
	}
	end := len(data) - sha256.Size
	payloadLen := binary.BigEndian.Uint64(data[end-8:])
	if have := uint64(end - 8 - headerLen); payloadLen != have {
		return nil, Errorf(ReasonTruncated, "a payload of %d bytes where the trailer says %d (cut short or extended)", have, payloadLen)
	}
	if sum := sha256.Sum256(data[:end]); !bytes.Equal(sum[:], data[end:]) {
		return nil, Errorf(ReasonCorrupt, "checksum mismatch")
	}
	if kind := string(data[fixed:headerLen]); kind != f.Kind {
		return nil, Errorf(ReasonOtherKind, "holds a %q, not a %q", kind, f.Kind)
	}
	if v := binary.BigEndian.Uint32(data[len(magic):]); v != f.Version {
		return nil, Errorf(ReasonVersion, "%s version %d, this build reads version %d", f.Kind, v, f.Version)
	}
	return data[headerLen : end-8], nil
}
