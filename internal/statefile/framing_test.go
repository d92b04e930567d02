package statefile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testFormat = Format{Kind: "test-state", Version: 3,
	Previous: func(data []byte) bool { return bytes.HasPrefix(data, []byte("OLD\n")) }}

func writeFramed(t testing.TB, payload string) []byte {
	t.Helper()
	dir := t.TempDir()
	n, err := WriteFramed(dir, "state", testFormat, func(w io.Writer) error { _, err := io.WriteString(w, payload); return err })
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil || int64(len(b)) != n {
		t.Fatalf("read %d bytes (%v), WriteFramed wrote %d", len(b), err, n)
	}
	return b
}

func TestFramedRoundTrip(t *testing.T) {
	for _, payload := range []string{"", "x", strings.Repeat("payload ", 1000)} {
		b := writeFramed(t, payload)
		got, err := Unframe(b, testFormat)
		if err != nil || string(got) != payload {
			t.Fatalf("Unframe: %d bytes, %v; want %d bytes", len(got), err, len(payload))
		}
	}
	dir := t.TempDir()
	if _, err := WriteFramed(dir, "state", testFormat, func(w io.Writer) error { _, err := io.WriteString(w, "p"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFramed(filepath.Join(dir, "state"), testFormat, 1<<10); err != nil || string(got) != "p" {
		t.Fatalf("ReadFramed: %q, %v", got, err)
	}
}

// TestUnframeRefuses: every way a framed file can be unusable has its own
// reason, and any damage to any byte is refused.
func TestUnframeRefuses(t *testing.T) {
	good := writeFramed(t, "the payload of a state file")
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	other := testFormat
	other.Kind = "other-state"
	newer := testFormat
	newer.Version++
	cases := []struct {
		name   string
		data   []byte
		format Format
		reason string
	}{
		{"empty", []byte{}, testFormat, ReasonEmpty},
		{"truncated in the magic", good[:3], testFormat, ReasonTruncated},
		{"truncated in the header", good[:len(magic)+3], testFormat, ReasonTruncated},
		{"truncated in the payload", good[:len(good)-trailerSize-2], testFormat, ReasonTruncated},
		{"truncated by one byte", good[:len(good)-1], testFormat, ReasonTruncated},
		{"one byte more", append(bytes.Clone(good), 0), testFormat, ReasonTruncated},
		{"flipped version", flip(len(magic) + 3), testFormat, ReasonCorrupt},
		{"flipped kind", flip(len(magic) + 7), testFormat, ReasonCorrupt},
		{"flipped payload", flip(len(good) - trailerSize - 3), testFormat, ReasonCorrupt},
		{"flipped checksum", flip(len(good) - 1), testFormat, ReasonCorrupt},
		{"flipped magic", flip(0), testFormat, ReasonUnknownFormat},
		{"not a state file", bytes.Repeat([]byte("kube"), 100), testFormat, ReasonUnknownFormat},
		{"the previous layout", []byte("OLD\nsomething"), testFormat, ReasonPreviousFormat},
		{"another kind", good, other, ReasonOtherKind},
		{"another version", good, newer, ReasonVersion},
	}
	for _, c := range cases {
		_, err := Unframe(c.data, c.format)
		var se *Error
		if !errors.As(err, &se) || se.Reason != c.reason {
			t.Errorf("%s: %v, want reason %s", c.name, err, c.reason)
		}
	}
	for i := range good {
		if _, err := Unframe(flip(i), testFormat); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
}

// TestReadFramedNamesThePath: the Error of a file read from disk names it.
func TestReadFramedNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(path, []byte("OLD\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFramed(path, testFormat, 100)
	var se *Error
	if !errors.As(err, &se) || se.Path != path || se.Reason != ReasonPreviousFormat || !strings.Contains(err.Error(), path) {
		t.Fatalf("%v, want a previous-format Error naming %s", err, path)
	}
	if _, err := ReadFramed(filepath.Join(t.TempDir(), "missing"), testFormat, 100); !errors.As(err, &se) || se.Reason != ReasonMissing {
		t.Fatalf("missing: %v", err)
	}
}

func FuzzUnframe(f *testing.F) {
	good := writeFramed(f, "payload")
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		payload, err := Unframe(data, testFormat)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || se.Reason == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if len(payload) > len(data) {
			t.Fatal("payload longer than the file")
		}
	})
}
