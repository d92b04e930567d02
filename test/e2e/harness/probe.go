package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Probes run from inside a node's namespace, as a process on that node would.

// httpClient makes one fresh connection per request (kube-proxy balances
// connections, not requests), dialled inside the namespace; names resolve
// through resolver when given.
func (n *FabricNode) httpClient(resolver *net.Resolver) *http.Client {
	d := &net.Dialer{Timeout: 3 * time.Second, Resolver: resolver}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return n.NS.DialWith(ctx, d, network, addr)
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
	}
}

// Get fetches url from inside the node and parses the echo answer.
func (n *FabricNode) Get(ctx context.Context, url string) (Echo, error) {
	return n.get(ctx, n.httpClient(nil), url)
}

// GetVia fetches url from inside the node, resolving its host name through
// the DNS server at dnsAddr (host:port) only.
func (n *FabricNode) GetVia(ctx context.Context, dnsAddr, url string) (Echo, error) {
	return n.get(ctx, n.httpClient(n.Resolver(dnsAddr)), url)
}

func (n *FabricNode) get(ctx context.Context, client *http.Client, url string) (Echo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Echo{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Echo{}, fmt.Errorf("%s: GET %s: %w", n.Name, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Echo{}, fmt.Errorf("%s: GET %s: %w", n.Name, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Echo{}, fmt.Errorf("%s: GET %s: %s", n.Name, url, resp.Status)
	}
	e := ParseEcho(string(body))
	if e.Pod == "" || e.Node == "" {
		return e, fmt.Errorf("%s: GET %s: not an echo answer: %q", n.Name, url, body)
	}
	return e, nil
}

// Tally sends count requests to url from inside the node and counts the
// answering pods. The first failure ends it.
func (n *FabricNode) Tally(ctx context.Context, url string, count int) (map[string]int, error) {
	client := n.httpClient(nil)
	pods := map[string]int{}
	for range count {
		e, err := n.get(ctx, client, url)
		if err != nil {
			return pods, err
		}
		pods[e.Pod]++
	}
	return pods, nil
}

// Resolver resolves only through the DNS server at dnsAddr, from inside the node.
func (n *FabricNode) Resolver(dnsAddr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return n.NS.DialContext(ctx, network, dnsAddr)
		},
	}
}

// Dig runs `dig +short @server name type` inside the node and returns the
// answer lines sorted (the command SuperEdge's demo runs).
func (n *FabricNode) Dig(ctx context.Context, server, name, qtype string) ([]string, error) {
	return n.DigFrom(ctx, "", server, name, qtype)
}

// DigFrom is Dig with the query sent from source (a pod IP on this node),
// as a pod's own query would be; empty source lets the kernel choose.
func (n *FabricNode) DigFrom(ctx context.Context, source, server, name, qtype string) ([]string, error) {
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"+short", "+time=2", "+tries=1", "-p", port}
	if source != "" {
		args = append(args, "-b", source)
	}
	out, err := n.NS.Run(ctx, "dig", append(args, "@"+host, name, qtype)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines, nil
}

// ProxyRules dumps kube-proxy's rules in the node: iptables-save, or the nft
// ruleset in nftables mode.
func (n *FabricNode) ProxyRules(ctx context.Context, mode string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if mode == ProxyModeNFTables {
		return n.NS.Run(ctx, "nft", "list", "ruleset")
	}
	return n.NS.Run(ctx, "iptables-save")
}
