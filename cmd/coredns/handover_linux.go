package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coredns/caddy"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"golang.org/x/sys/unix"
)

// A CoreDNS stopped by SIGTERM while another process serves the same
// address (the node's DaemonSet in the host network during an update: both
// bind with SO_REUSEPORT) hands its UDP share over before it stops reading.
// Without this the kernel keeps giving the old socket its share of the
// queries until caddy closes it, and closing drops every datagram still
// queued: caddy's Stop first stops reading, then waits (up to 5 s) for the
// queries being answered, then closes. Here, once the shutdown callbacks
// (health's lameduck) have run and before caddy stops the servers, each
// listening UDP socket is connected to its own address: the kernel then
// gives a connected socket of a SO_REUSEPORT group only datagrams from that
// peer, so new queries go to the other process, and what is already queued
// is read and answered as before. Alone on the address the old process
// answers nothing after its lameduck either way (port unreachable instead
// of a drop).

// handoverDrainLimit bounds the wait for the queue to empty.
const handoverDrainLimit = 2 * time.Second

var sigtermShutdown atomic.Bool

func init() {
	// SIGTERM's path runs the shutdown callbacks, then OnProcessExit, then
	// stops the servers; SIGINT's runs OnProcessExit first and exits with
	// no stop of the servers: only the first is a handover point.
	caddy.RegisterEventHook("servicegroup-udp-handover", func(event caddy.EventName, info any) error {
		if event == caddy.ShutdownEvent && info == "SIGTERM" {
			sigtermShutdown.Store(true)
		}
		return nil
	})
	caddy.OnProcessExit = append(caddy.OnProcessExit, func() {
		if sigtermShutdown.Load() {
			handOverUDP()
		}
	})
}

// handOverUDP takes every UDP socket a server of a running instance listens
// on out of its reuseport group's choice and waits until its queue is read.
func handOverUDP() {
	listening := map[string]bool{}
	for _, inst := range caddy.Instances() {
		for _, s := range inst.Servers() {
			if a, ok := s.LocalAddr().(*net.UDPAddr); ok {
				listening[net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))] = true
			}
		}
	}
	if len(listening) == 0 {
		return
	}
	// The sockets are the servers' own (caddy does not expose them): the
	// process's UDP sockets bound to those addresses.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		clog.Errorf("UDP handover: %v", err)
		return
	}
	var handed []int
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_DGRAM {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil || !listening[sockaddrString(sa)] {
			continue
		}
		if err := unix.Connect(fd, sa); err != nil {
			clog.Errorf("UDP handover of %s: %v", sockaddrString(sa), err)
			continue
		}
		handed = append(handed, fd)
	}
	// Read until each queue was seen empty twice in a row (a datagram the
	// kernel chose this socket for just before the connect may still land).
	deadline := time.Now().Add(handoverDrainLimit)
	for _, fd := range handed {
		for empty := 0; empty < 2 && time.Now().Before(deadline); {
			if n, err := unix.IoctlGetInt(fd, unix.SIOCINQ); err != nil || n == 0 {
				empty++
			} else {
				empty = 0
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	clog.Infof("UDP handover: %d listening socket(s) no longer receive new queries", len(handed))
}

func sockaddrString(sa unix.Sockaddr) string {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return ""
}
