package trafficmode

import (
	"strings"
	"testing"
)

func TestDecideZone(t *testing.T) {
	const key = "zone1"
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		source              string
		want                ZoneAction
		value               string
	}{
		{"no zone yet", l(key, "u1"), nil, key, ZoneWrite, "u1"},
		{"ours, current", l(key, "u1", ZoneLabel, "u1"), l(ZoneWrittenAnnotation, "u1"), key, ZoneKeep, "u1"},
		{"ours, nodeunit moved", l(key, "u2", ZoneLabel, "u1"), l(ZoneWrittenAnnotation, "u1"), key, ZoneWrite, "u2"},
		{"someone else's, differs", l(key, "u2", ZoneLabel, "eu-west-1a"), nil, key, ZoneConflict, "u2"},
		{"someone else's, agrees", l(key, "u2", ZoneLabel, "u2"), nil, key, ZoneKeep, "u2"},
		{"ours overwritten by someone", l(key, "u1", ZoneLabel, "x"), l(ZoneWrittenAnnotation, "u1"), key, ZoneConflict, "u1"},
		{"ours overwritten to agree", l(key, "u2", ZoneLabel, "u2"), l(ZoneWrittenAnnotation, "u1"), key, ZoneRelease, "u2"},
		{"ours removed by someone", l(key, "u1"), l(ZoneWrittenAnnotation, "u1"), key, ZoneWrite, "u1"},
		{"node lost the key", l(ZoneLabel, "u1"), l(ZoneWrittenAnnotation, "u1"), key, ZoneRelease, ""},
		{"key emptied", l(key, "", ZoneLabel, "u1"), l(ZoneWrittenAnnotation, "u1"), key, ZoneRelease, ""},
		{"writer off", l(key, "u1", ZoneLabel, "u1"), l(ZoneWrittenAnnotation, "u1"), "", ZoneRelease, ""},
		{"writer off, not ours", l(key, "u1", ZoneLabel, "u1"), nil, "", ZoneKeep, ""},
		{"no key, not ours", l(ZoneLabel, "eu"), nil, key, ZoneKeep, ""},
		{"source is the zone itself", l(ZoneLabel, "eu"), nil, ZoneLabel, ZoneKeep, ""},
	} {
		got, value := DecideZone(tc.labels, tc.annotations, tc.source)
		if got != tc.want || value != tc.value {
			t.Errorf("%s: DecideZone = %v %q, want %v %q", tc.name, got, value, tc.want, tc.value)
		}
	}
}

func TestNativeKeyError(t *testing.T) {
	for _, tc := range []struct {
		gridKey, flag, err string
	}{
		{"zone1", "zone1", ""},
		{ZoneLabel, "", ""},
		{"zone1", "", "(--zone-from-grid-key is empty): start it with --zone-from-grid-key=zone1"},
		{"zone2", "zone1", `sets from grid key "zone1", and this grid's key is "zone2"`},
		{ZoneLabel, "zone1", `this grid's key is "topology.kubernetes.io/zone": key the grid on "zone1"`},
	} {
		err := NativeKeyError(tc.gridKey, tc.flag)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("NativeKeyError(%q, %q) = %v, want %q", tc.gridKey, tc.flag, err, tc.err)
		}
	}
}

func TestValidZoneFromGridKey(t *testing.T) {
	for key, ok := range map[string]bool{"": true, "zone1": true, "example.com/unit": true, ZoneLabel: false, "a b": false, "/x": false} {
		if err := ValidZoneFromGridKey(key); (err == nil) != ok {
			t.Errorf("ValidZoneFromGridKey(%q) = %v, want ok=%v", key, err, ok)
		}
	}
}
