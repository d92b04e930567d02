package siteid

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
		got := LeaseName(value)
		if want != "" && got != want {
			t.Errorf("%q: Lease %q, want %q (names that were valid keep their Lease)", value, got, want)
		}
		if msgs := validation.IsDNS1123Subdomain(got); len(msgs) > 0 {
			t.Errorf("%q: Lease %q is no object name: %v", value, got, msgs)
		}
	}
	if LeaseName("Shop_1") == LeaseName("shop_1") || LeaseName("Shop_1") == LeaseName("shop-1") {
		t.Error("two site values share a Lease")
	}
}
