package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestChildNameLimits(t *testing.T) {
	cases := []struct {
		name                     string
		deployment, sts, service bool
	}{
		{"web-east", true, true, true},
		{"web-Bad_Unit", false, false, false},
		{"web-1a", true, true, true},
		{"1web-svc", true, true, false}, // DNS-1035 must start with a letter
		{strings.Repeat("a", 52), true, true, true},
		{strings.Repeat("a", 53), true, false, true},
		{strings.Repeat("a", 63), true, false, true},
		{strings.Repeat("a", 64), true, false, false},
		{strings.Repeat("a", 253), true, false, false},
		{strings.Repeat("a", 254), false, false, false},
		{"web.east", true, false, false},
	}
	for _, c := range cases {
		if got := validDeploymentName(c.name) == nil; got != c.deployment {
			t.Errorf("Deployment %q: valid=%v, want %v", c.name, got, c.deployment)
		}
		if got := validStatefulSetName(c.name) == nil; got != c.sts {
			t.Errorf("StatefulSet %q: valid=%v, want %v", c.name, got, c.sts)
		}
		if got := validServiceName(c.name) == nil; got != c.service {
			t.Errorf("Service %q: valid=%v, want %v", c.name, got, c.service)
		}
	}
	if err := validStatefulSetName(strings.Repeat("a", 53)); err == nil || !strings.Contains(err.Error(), "52") {
		t.Errorf("the error must name the limit: %v", err)
	}
}

func TestValidGrid(t *testing.T) {
	for _, c := range []struct {
		name, key, reason string
	}{
		{"web", "zone1", ""},
		{"web", "", ReasonEmptyGridUniqKey},
		{"web", "bad key", ReasonInvalidGridUniqKey},
		{"web", "topology.kubernetes.io/zone", ""}, // prefixed keys are grid keys too
		{"web", "example.com/" + strings.Repeat("k", 63), ""},
		{"web", "/zone", ReasonInvalidGridUniqKey},
		{strings.Repeat("w", 64), "zone1", ReasonInvalidGridName},
	} {
		reason, err := validGrid(c.name, c.key)
		if reason != c.reason || (err == nil) != (c.reason == "") {
			t.Errorf("validGrid(%q, %q) = %q, %v; want %q", c.name, c.key, reason, err, c.reason)
		}
	}
}

// FuzzChildNames: whatever the grid name and nodeunit value, validation never
// panics and a name it accepts is one the apiserver and the StatefulSet
// controller accept.
func FuzzChildNames(f *testing.F) {
	f.Add("statefulsetgrid-demo", "nodeunit1")
	f.Add("g", "Bad_Unit")
	f.Add(strings.Repeat("x", 40), "a-rather-long-value")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, grid, value string) {
		name := childName(grid, value)
		if validDeploymentName(name) == nil && len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("accepted Deployment name %q", name)
		}
		if validStatefulSetName(name) == nil {
			if len(name) > maxStatefulSetNameLength || len(validation.IsDNS1123Label(name+"-99999999")) > 0 {
				t.Fatalf("accepted StatefulSet name %q whose pods cannot be named", name)
			}
			if len(validation.IsValidLabelValue(name+"-7b4f8c9d5f")) > 0 {
				t.Fatalf("StatefulSet %q leaves no room for its revision label", name)
			}
		}
		svc := serviceName(grid)
		if validServiceName(svc) == nil && len(validation.IsDNS1035Label(svc)) > 0 {
			t.Fatalf("accepted Service name %q", svc)
		}
	})
}
