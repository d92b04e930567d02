package wrapper

import (
	"crypto/tls"
	"net"
	"sync"

	"k8s.io/klog/v2"
)

// DefaultMaxConnectionsPerUID is what one local user other than root may
// hold of the command's --max-connections (100): a quarter, as for
// watches and requests.
const DefaultMaxConnectionsPerUID = 25

// IdentifyClients wraps the API port's listener (around the total cap,
// netutil.LimitListener's, so that ConnContext finds its connections
// under TLS's): it looks up the uid owning each accepted
// connection's client socket once (peeruid.go), and closes at once a
// connection of a uid other than root that holds perUID open already, or
// when those uids together hold total-perUID: root, which kube-proxy and
// the node's CoreDNS run as, can always connect. ConnContext then takes
// the uid from the connection.
func IdentifyClients(ln net.Listener, total, perUID int) net.Listener {
	return &clientListener{Listener: ln, budgets: newClientBudgets("connections", total, perUID)}
}

type clientListener struct {
	net.Listener
	budgets *clientBudgets
}

func (l *clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid := lookupClientUID(c.LocalAddr(), c.RemoteAddr())
		if refused := l.budgets.acquire(uid); refused != "" {
			l.budgets.refused(uid)
			klog.V(2).InfoS("Connection closed", "remote", c.RemoteAddr().String(), "reason", refused)
			_ = c.Close()
			continue
		}
		return &clientConn{Conn: c, uid: uid, budgets: l.budgets}, nil
	}
}

// clientConn is a connection with its client's uid; Close gives its slot
// back once.
type clientConn struct {
	net.Conn
	uid     clientUID
	budgets *clientBudgets
	once    sync.Once
}

func (c *clientConn) Close() error {
	c.once.Do(func() { c.budgets.release(c.uid) })
	return c.Conn.Close()
}

// uidOfConn is the uid IdentifyClients found for c (under TLS too).
func uidOfConn(c net.Conn) (clientUID, bool) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	cc, ok := c.(*clientConn)
	if !ok {
		return clientUID{}, false
	}
	return cc.uid, true
}
