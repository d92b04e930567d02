package trafficmode

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        Mode
		err         string
	}{
		{nil, Wrapper, ""},
		{map[string]string{"other": "native"}, Wrapper, ""},
		{map[string]string{Annotation: "wrapper"}, Wrapper, ""},
		{map[string]string{Annotation: "native"}, Native, ""},
		{map[string]string{Annotation: ""}, "", `servicegroup.io/traffic-mode "" is not a traffic mode`},
		{map[string]string{Annotation: "Native"}, "", `"Native" is not a traffic mode: want "wrapper"`},
		{map[string]string{Annotation: " native"}, "", `" native" is not`},
	} {
		got, err := Of(tc.annotations)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Of(%v) = %q, %v; want %q, error containing %q", tc.annotations, got, err, tc.want, tc.err)
		}
	}
}

// FuzzParse: exactly the two mode names parse, each to itself; anything
// else is an error that quotes the value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"wrapper", "native", "", "NATIVE", "native\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := Parse(v)
		valid := v == "wrapper" || v == "native"
		if valid != (err == nil) {
			t.Fatalf("Parse(%q) = %q, %v", v, m, err)
		}
		if valid && string(m) != v {
			t.Fatalf("Parse(%q) = %q", v, m)
		}
		if !valid && (m != "" || !strings.Contains(err.Error(), Annotation)) {
			t.Fatalf("Parse(%q) = %q, %v", v, m, err)
		}
	})
}
