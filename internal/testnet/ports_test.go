package testnet

import (
	"net"
	"strconv"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

func TestFreePortIsBindableAndNotEphemeral(t *testing.T) {
	low, err := ephemeralLow()
	if err != nil {
		testenv.Missing(t, "no ephemeral range to compare with: %v", err)
	}
	seen := map[int]bool{}
	for range 20 {
		port, err := FreePort("127.0.0.1", true)
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if low >= portsTo && (port < portsFrom || port >= portsTo) {
			t.Fatalf("port %d outside [%d, %d) although the ephemeral range starts at %d", port, portsFrom, portsTo, low)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("TCP %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("UDP %s: %v", addr, err)
		}
		u.Close()
		l.Close()
	}
}
