package gridunit

import "testing"

func TestTemplate(t *testing.T) {
	pool := map[string]string{"a": "canary", "b": "", "c": "default"}
	for _, tc := range []struct {
		value, defaultName, want string
	}{
		{"a", "", "canary"},
		{"a", "other", "canary"},
		{"b", "other", "default"}, // empty entry: spec.template, not defaultTemplateName
		{"c", "other", "default"},
		{"z", "", "default"},
		{"z", "other", "other"},
		{"z", "default", "default"},
	} {
		got := Template(pool, tc.defaultName, tc.value)
		if got.Name != tc.want || got.Reason == "" {
			t.Errorf("Template(%q, default %q) = %+v, want %q with a reason", tc.value, tc.defaultName, got, tc.want)
		}
	}
	if got := ChildName("g", "zone1"); got != "g-zone1" {
		t.Errorf("ChildName = %q", got)
	}
}
