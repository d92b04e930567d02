package topology

import (
	"slices"
	"testing"
)

func TestParseKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{`["zone1"]`, []string{"zone1"}, true},
		{`["zone1","*"]`, []string{"zone1", "*"}, true},
		{`["topology.kubernetes.io/zone","kubernetes.io/hostname","*"]`, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname", "*"}, true},
		{`["*"]`, []string{"*"}, true},
		{`[]`, nil, false},
		{`zone1`, nil, false},
		{`["*","zone1"]`, nil, false},
		{`["zone1","zone1"]`, nil, false},
		{`["bad key!"]`, nil, false},
		{`[""]`, nil, false},
		{`[1]`, nil, false},
		{`["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`, nil, false},
	} {
		got, err := ParseKeys(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("ParseKeys(%s) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{`["zone1"]`, `["a","*"]`, `[]`, `["*","a"]`, `null`, `["a","a"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		keys, err := ParseKeys(in)
		if err != nil {
			return
		}
		if len(keys) == 0 || len(keys) > MaxTopologyKeys {
			t.Fatalf("accepted %d keys from %q", len(keys), in)
		}
		for i, k := range keys {
			if k == AnyKey && i != len(keys)-1 {
				t.Fatalf("accepted * not last in %q", in)
			}
		}
	})
}
