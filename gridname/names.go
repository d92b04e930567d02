package gridname

import "strings"

// SplitHost splits the first label of a unified name, {grid}-{ordinal}:
// the ordinal is the run after the last '-', so grid names containing '-'
// or digits split the way StatefulSet pod names are built.
func SplitHost(host string) (grid, ordinal string, ok bool) {
	i := strings.LastIndexByte(host, '-')
	if i <= 0 || !IsOrdinal(host[i+1:]) {
		return "", "", false
	}
	return host[:i], host[i+1:], true
}

// IsOrdinal accepts the ordinals a StatefulSet can give its pods: decimal,
// no leading zeros, at most spec.ordinals.start + spec.replicas - 1, both
// int32, so below 2^32. It calls nothing: it runs on every query, at the
// deepest point of the answer path.
func IsOrdinal(s string) bool {
	if s == "" || len(s) > len(maxOrdinal) || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	// Same length: decimal strings compare as their values.
	return len(s) < len(maxOrdinal) || s <= maxOrdinal
}

// maxOrdinal is 2^32 - 1.
const maxOrdinal = "4294967295"
