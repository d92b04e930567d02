package gridname

import (
	"strconv"
	"strings"
)

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
// int32, so below 2^32.
func IsOrdinal(s string) bool {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}
