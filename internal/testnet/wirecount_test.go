package testnet

import (
	"io"
	"net"
	"testing"
)

// TestWireCountCountsBothDirections: what one end writes and reads through
// a counted connection is counted, each direction apart, in bytes as they
// crossed the socket.
func TestWireCountCountsBothDirections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err != nil {
			served <- err
			return
		}
		_, err = c.Write([]byte("a reply of 18 byte"))
		served <- err
	}()
	var w WireCount
	c, err := w.DialContext(&net.Dialer{})(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if w.Tx.Load() != 5 || w.Rx.Load() != int64(len(got)) || len(got) != 18 || w.Total() != 23 {
		t.Fatalf("sent 5 and received %d bytes; counted tx %d, rx %d, total %d", len(got), w.Tx.Load(), w.Rx.Load(), w.Total())
	}
}
