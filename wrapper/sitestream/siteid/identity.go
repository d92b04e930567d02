package siteid

import "strings"

// Identity is what a candidate writes into the Lease, and a wrapper sends
// its peers: its node, the address of its peer port and the SHA-256 of its
// peer certificate, which is all a follower needs to reach it pinned.
func Identity(node, addr, pin string) string { return node + "@" + addr + "#" + pin }

// Parse reads an identity from the Lease, a peer's header or a peer's
// answer. It accepts only what Identity writes (a node, an address, a
// 64-character pin): anything else names no wrapper to reach.
func Parse(id string) (node, addr, pin string, ok bool) {
	node, rest, ok1 := strings.Cut(id, "@")
	addr, pin, ok2 := strings.Cut(rest, "#")
	return node, addr, pin, ok1 && ok2 && node != "" && addr != "" && len(pin) == 64
}
