package controller

import (
	"errors"
	"testing"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// FuzzPickTemplate checks SuperEdge's template rule against a plain
// statement of it: a nodeunit listed in templates uses that name, else the
// default name; "default" or "" means spec.template; any other name is a
// pool entry or an unknownTemplateError naming it.
func FuzzPickTemplate(f *testing.F) {
	f.Add("zone1", "test1", "test1", "default", true)
	f.Add("zone2", "", "test2", "test9", false)
	f.Add("zone3", "default", "", "", true)
	f.Fuzz(func(t *testing.T, value, assigned, poolName, defaultName string, listed bool) {
		templates := map[string]string{}
		if listed {
			templates[value] = assigned
		}
		pool := map[string]string{poolName: "pool:" + poolName}
		name := templateName(templates, defaultName, value)

		want := defaultName
		if listed {
			want = assigned
		}
		if want == "" {
			want = superedgev1.DefaultTemplateName
		}
		if name != want {
			t.Fatalf("templateName = %q, want %q", name, want)
		}
		got, err := pickTemplate("main", pool, name)
		var unknown unknownTemplateError
		switch {
		case name == superedgev1.DefaultTemplateName:
			if err != nil || got != "main" {
				t.Fatalf("%q: got %q, %v; want spec.template", name, got, err)
			}
		case name == poolName:
			if err != nil || got != "pool:"+poolName {
				t.Fatalf("%q: got %q, %v; want the pool entry", name, got, err)
			}
		default:
			if !errors.As(err, &unknown) || unknown.name != name {
				t.Fatalf("%q not in the pool: got %q, %v", name, got, err)
			}
		}
	})
}
