package main

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// addLoopbackAddress puts prefix (a single address, /32 or /128) on the
// loopback interface of the network namespace the process runs in, and
// leaves it as it is when it is there already: the node-local address the
// node's CoreDNS binds, added by a host-network init container whose only
// capability is CAP_NET_ADMIN, at every start of the pod (the address does
// not outlive a reboot; the pod's next start adds it again).
func addLoopbackAddress(prefix string) error {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return fmt.Errorf("--add-loopback-address %q: %w", prefix, err)
	}
	if !p.IsSingleIP() || p.Addr().IsLoopback() || p.Addr().IsUnspecified() || p.Addr().IsMulticast() {
		return fmt.Errorf("--add-loopback-address %q: want one unicast address outside 127.0.0.0/8 and ::1 with its full prefix length, e.g. 169.254.20.10/32", prefix)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("--add-loopback-address: the loopback interface: %w", err)
	}
	addr, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	// Replace, not add: an address already there is no error.
	if err := netlink.AddrReplace(lo, addr); err != nil {
		return fmt.Errorf("--add-loopback-address %s on lo: %w", p, err)
	}
	fmt.Printf("address %s on lo\n", p)
	return nil
}
