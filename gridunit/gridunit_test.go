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

// TestValueOf: ValueOf reads back exactly what ChildName wrote, and nothing
// that is not of that form.
func TestValueOf(t *testing.T) {
	for _, tc := range []struct {
		grid, value string
	}{{"g", "zone1"}, {"nodeunit1-db", "nodeunit1"}, {"a", "b-c"}, {"a-b", "c"}, {"web", "1"}} {
		if v, ok := ValueOf(tc.grid, ChildName(tc.grid, tc.value)); !ok || v != tc.value {
			t.Errorf("ValueOf(%q, ChildName(%q, %q)) = %q, %v", tc.grid, tc.grid, tc.value, v, ok)
		}
	}
	for _, tc := range []struct{ grid, child string }{
		{"g", "g"}, {"g", "g-"}, {"g", "gx"}, {"g", "gx-a"}, {"g", "h-a"}, {"g-a", "g-a"}, {"", "a"},
	} {
		if v, ok := ValueOf(tc.grid, tc.child); ok {
			t.Errorf("ValueOf(%q, %q) = %q, true; want false", tc.grid, tc.child, v)
		}
	}
}
