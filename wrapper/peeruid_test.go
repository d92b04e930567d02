package wrapper

import (
	"net"
	"os"
	"testing"
)

// The real kernel's tables: a connection of this process over loopback,
// IPv4 and IPv6, is found with this process's uid, from either end; a
// peer on another address (none on this host has it) is unknown.
func TestLookupClientUIDOfThisProcess(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (no loopback of that family here)", network, err)
			continue
		}
		defer ln.Close()
		client, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer server.Close()
		want := clientUID{uid: uint32(os.Getuid()), known: true}
		if got := lookupClientUID(server.LocalAddr(), server.RemoteAddr()); got != want {
			t.Errorf("%s: the client's uid from the server's end: %v, want %v", network, got, want)
		}
		if got := lookupClientUID(client.LocalAddr(), client.RemoteAddr()); got != want {
			t.Errorf("%s: the server's uid from the client's end: %v, want %v", network, got, want)
		}
	}
	remote := &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 40000}
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 51006}
	if got := lookupClientUID(local, remote); got.known {
		t.Errorf("a peer on another host: %v, want unknown", got)
	}
	if got := lookupClientUID(local, &net.UnixAddr{Name: "@x", Net: "unix"}); got.known {
		t.Errorf("a unix peer: %v, want unknown", got)
	}
}
