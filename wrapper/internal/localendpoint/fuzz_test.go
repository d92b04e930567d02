package localendpoint

import (
	"strconv"
	"testing"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
)

// hack/fuzz-smoke.sh runs this in `make test`.

// An accepted local endpoint is an address without zone and a port in
// 1-65535, and reads back the same from the annotations it would write.
func FuzzParse(f *testing.F) {
	f.Add("127.0.0.1", "51003", true, true)
	f.Add("::ffff:169.254.20.11", "443", true, true)
	f.Add("fe80::1%eth0", "1", true, true)
	f.Add("0.0.0.0", "65536", true, false)
	f.Fuzz(func(t *testing.T, ip, port string, hasIP, hasPort bool) {
		a := map[string]string{}
		if hasIP {
			a[superedgev1.AnnotationLocalEndpoint] = ip
		}
		if hasPort {
			a[superedgev1.AnnotationLocalPort] = port
		}
		le, found, err := Parse(a)
		if found != (hasIP || hasPort) {
			t.Fatalf("found %v for %v", found, a)
		}
		if err != nil || !found {
			return
		}
		if !le.IP.IsValid() || le.IP.Zone() != "" || le.IP.IsUnspecified() || le.IP.Is4In6() || le.Port < 1 || le.Port > 65535 {
			t.Fatalf("%v read as %v:%d", a, le.IP, le.Port)
		}
		again, _, err := Parse(map[string]string{
			superedgev1.AnnotationLocalEndpoint: le.IP.String(), superedgev1.AnnotationLocalPort: strconv.Itoa(int(le.Port)),
		})
		if err != nil || again != le {
			t.Fatalf("%v read as %v, which reads back as %v (%v)", a, le, again, err)
		}
	})
}
