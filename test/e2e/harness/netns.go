package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/servicegroup/servicegroup/internal/testnet"
)

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/run/netns"

// NetNS is one named network namespace the harness created (`ip netns add`).
// Sockets opened through it live in that namespace for their whole life.
type NetNS struct {
	Name string
	fd   *os.File
}

func openNetNS(name string) (*NetNS, error) {
	f, err := os.Open(filepath.Join(netnsDir, name))
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", name, err)
	}
	return &NetNS{Name: name, fd: f}, nil
}

func (n *NetNS) close() {
	if n != nil && n.fd != nil {
		n.fd.Close()
	}
}

// Do runs fn on an OS thread inside the namespace (testnet.InNetNS).
func (n *NetNS) Do(fn func() error) error { return testnet.InNetNS(n.fd, fn) }

// Listen opens a listener inside the namespace.
func (n *NetNS) Listen(network, addr string) (net.Listener, error) {
	return inNS(n, func() (net.Listener, error) { return net.Listen(network, addr) })
}

// DialContext connects from inside the namespace (usable as an
// http.Transport's or net.Resolver's dial function).
func (n *NetNS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return n.DialWith(ctx, &net.Dialer{}, network, addr)
}

// DialWith is DialContext with d's settings (timeout, resolver).
func (n *NetNS) DialWith(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	return inNS(n, func() (net.Conn, error) { return d.DialContext(ctx, network, addr) })
}

// inNS returns what open opens inside the namespace: a socket keeps the
// namespace it was made in.
func inNS[T any](n *NetNS, open func() (T, error)) (T, error) {
	var v T
	err := n.Do(func() (err error) {
		v, err = open()
		return err
	})
	return v, err
}

// Command builds a command that runs inside the namespace through
// `ip netns exec` (which execs the program in place: the PID is the program's).
func (n *NetNS) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command inside the namespace and returns its combined output.
func (n *NetNS) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: ip netns exec %s %s %s: %w", n.Name, n.Name, name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// IP runs `ip -n NS ARGS...`.
func (n *NetNS) IP(ctx context.Context, args ...string) error {
	return ipCmd(ctx, append([]string{"-n", n.Name}, args...)...)
}

// ipCmd runs iproute2's `ip` and turns a failure into an error with its output.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipOutput runs `ip` and returns its standard output.
func ipOutput(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
