package siteid

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaseName is the Lease the wrappers of a site elect their leader with.
// A label value may hold what an object name may not (capitals, "_";
// `Shop_1`): such a site's Lease is named by the value made lower case
// with every other character as "-", and a hash of the value itself, so
// that two values never share a Lease.
func LeaseName(group string) string {
	const prefix = "application-grid-wrapper-site-"
	if name := prefix + group; len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(group))
	clean := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, group), "-")
	if clean != "" {
		clean += "-"
	}
	return prefix + clean + hex.EncodeToString(sum[:5])
}
