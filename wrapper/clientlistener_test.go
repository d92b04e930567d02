package wrapper

import (
	"crypto/tls"
	"net"
	"os"
	"testing"

	"golang.org/x/net/netutil"
)

// A connection IdentifyClients accepted carries its client's uid, found
// by ConnContext also under TLS (as http.Server.ServeTLS wraps it); its
// slot is given back once however often it is closed.
func TestIdentifyClientsCarriesUID(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := IdentifyClients(netutil.LimitListener(raw, 4), 4, 2)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	want := clientUID{uid: uint32(os.Getuid()), known: true}
	if got, ok := uidOfConn(tls.Server(c, &tls.Config{})); !ok || got != want {
		t.Fatalf("under TLS: %v %v, want %v", got, ok, want)
	}
	budgets := ln.(*clientListener).budgets
	held := func() int { budgets.mu.Lock(); defer budgets.mu.Unlock(); return budgets.held[want] }
	if held() != 1 {
		t.Fatalf("held %d, want 1", held())
	}
	c.Close()
	c.Close()
	if held() != 0 {
		t.Fatalf("held %d after closing twice, want 0", held())
	}
}
