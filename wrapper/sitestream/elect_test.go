package sitestream

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Every site label value names a Lease the apiserver accepts (a site whose
// value is no object name would never elect), the same one for the same
// value and never one another value has.
func TestSiteLeaseName(t *testing.T) {
	for value, want := range map[string]string{
		"shop":      "application-grid-wrapper-site-shop",
		"shop-1.eu": "application-grid-wrapper-site-shop-1.eu",
		"Shop_1":    "",
		"shop_1":    "",
		"_":         "",
		"A.b-C_d":   "",
	} {
		got := siteLeaseName(value)
		if want != "" && got != want {
			t.Errorf("%q: Lease %q, want %q (names that were valid keep their Lease)", value, got, want)
		}
		if msgs := validation.IsDNS1123Subdomain(got); len(msgs) > 0 {
			t.Errorf("%q: Lease %q is no object name: %v", value, got, msgs)
		}
	}
	if siteLeaseName("Shop_1") == siteLeaseName("shop_1") || siteLeaseName("Shop_1") == siteLeaseName("shop-1") {
		t.Error("two site values share a Lease")
	}
}

func FuzzSiteLeaseName(f *testing.F) {
	for _, s := range []string{"shop", "Shop_1", "a.b", "A", "0-0", "x_Y.z"} {
		f.Add(s, s+"_")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(validation.IsValidLabelValue(a)) > 0 || len(validation.IsValidLabelValue(b)) > 0 || a == "" || b == "" {
			return
		}
		na, nb := siteLeaseName(a), siteLeaseName(b)
		if msgs := validation.IsDNS1123Subdomain(na); len(msgs) > 0 {
			t.Fatalf("%q: Lease %q is no object name: %v", a, na, msgs)
		}
		if a != b && na == nb {
			t.Fatalf("%q and %q share the Lease %q", a, b, na)
		}
	})
}
