package wrapper

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"

	"github.com/servicegroup/servicegroup/wrapper/internal/proctcp"
)

// Local clients of the API port come without credentials (kube-proxy and
// the node's CoreDNS use the wrapper's pinned certificate only), so the
// one thing that tells them apart is who owns the client's socket: for a
// connection from this host, the kernel lists that socket in
// /proc/net/tcp (or tcp6) with its owner's uid. It is read once per
// connection, at accept (IdentifyClients, or Server.ConnContext).

// clientUID is who a connection came from: a uid, or unknown (another
// host, or a socket the kernel no longer lists).
type clientUID struct {
	uid   uint32
	known bool
}

// isRoot: uid 0, which kube-proxy and the node's CoreDNS run as.
func (c clientUID) isRoot() bool { return c.known && c.uid == 0 }

// who names c in an answer: "uid N" or "clients of unknown uid".
func (c clientUID) who() string {
	if !c.known {
		return "clients of unknown uid"
	}
	return "uid " + c.String()
}

func (c clientUID) verbS() string {
	if c.known {
		return "s"
	}
	return ""
}

func (c clientUID) String() string {
	if !c.known {
		return "unknown"
	}
	return strconv.FormatUint(uint64(c.uid), 10)
}

type clientUIDKey struct{}

// procNetTCP are the kernel's tables of TCP sockets, IPv4 and IPv6.
var procNetTCP = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// ConnContext puts the uid that owns c's peer socket (IdentifyClients
// found it, or it is looked up now) in the context of c's requests, for
// the per-uid budgets (clientbudget.go): set it as the API server's
// http.Server.ConnContext. A peer on another host, or one whose
// socket cannot be found, is unknown. A server without it applies the
// totals alone, to every client as one.
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	uid, ok := uidOfConn(c)
	if !ok {
		uid = lookupClientUID(c.LocalAddr(), c.RemoteAddr())
	}
	return context.WithValue(ctx, clientUIDKey{}, uid)
}

// clientOf is the uid ConnContext found for req's connection; false when
// the server did not look.
func clientOf(req *http.Request) (clientUID, bool) {
	c, ok := req.Context().Value(clientUIDKey{}).(clientUID)
	return c, ok
}

// lookupClientUID finds the uid owning the socket at the other end of the
// connection local<->remote, when that socket is on this host.
func lookupClientUID(local, remote net.Addr) clientUID {
	l, lok := addrPort(local)
	r, rok := addrPort(remote)
	// Only a peer with a loopback address or this end's own can be a
	// socket of this host.
	if !lok || !rok || !(r.Addr().IsLoopback() || r.Addr() == l.Addr()) {
		return clientUID{}
	}
	for _, name := range procNetTCP {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		// The peer's socket: its local address is our remote, and back.
		uid, found, err := proctcp.FindUID(f, r, l)
		f.Close()
		if err == nil && found {
			return clientUID{uid: uid, known: true}
		}
	}
	return clientUID{}
}

func addrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := t.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), ap.IsValid()
}
