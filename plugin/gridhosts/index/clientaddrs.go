package index

import (
	"net/netip"
	"time"
)

// clientRef is one pod claiming an address, for the clients mode.
type clientRef struct {
	pod         nsName
	node        string
	created     time.Time
	terminating bool
	claimed     uint64 // when this pod first claimed the address
}

// clientAddrs maps a pod IP to every pod that claims it. An address is
// reused as soon as its pod is gone from the node, while the API may still
// hold the old pod (terminating, or its status not yet updated), and events
// of the two pods arrive in any order: the holder is the pod not being
// deleted, and among those the newest.
type clientAddrs struct {
	refs   map[netip.Addr][]clientRef
	claims uint64
}

func newClientAddrs(n int) clientAddrs { return clientAddrs{refs: make(map[netip.Addr][]clientRef, n)} }

func (c *clientAddrs) add(ip netip.Addr, r clientRef) {
	refs := c.refs[ip]
	for i := range refs {
		if refs[i].pod == r.pod {
			r.claimed = refs[i].claimed // an update is not a new claim
			refs[i] = r
			return
		}
	}
	c.claims++
	r.claimed = c.claims
	c.refs[ip] = append(refs, r)
}

func (c *clientAddrs) remove(ip netip.Addr, pod nsName) {
	refs := c.refs[ip]
	for i := range refs {
		if refs[i].pod == pod {
			refs = append(refs[:i], refs[i+1:]...)
			break
		}
	}
	if len(refs) == 0 {
		delete(c.refs, ip)
		return
	}
	c.refs[ip] = refs
}

// holder is the pod that holds ip now.
func (c *clientAddrs) holder(ip netip.Addr) (clientRef, bool) {
	refs := c.refs[ip]
	if len(refs) == 0 {
		return clientRef{}, false
	}
	best := refs[0]
	for _, r := range refs[1:] {
		if newerHolder(r, best) {
			best = r
		}
	}
	return best, true
}

func newerHolder(a, b clientRef) bool {
	if a.terminating != b.terminating {
		return !a.terminating
	}
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	// creationTimestamp has one-second grain: the later claim wins.
	return a.claimed > b.claimed
}
