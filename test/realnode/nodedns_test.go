package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testwait"
)

// systemctlStandIn is put first on PATH for the guide's on-node blocks
// that restart the kubelet: these nodes have no systemd, so it records
// the request, which the test then carries out as the unit would
// (Node.RestartKubelet).
const systemctlStandIn = `#!/bin/sh
echo "$*" >> "$SYSTEMCTL_LOG"
`

// nodeDNSStep prepares a guide block run on node n that edits the
// kubelet's configuration file and runs `systemctl restart kubelet`: it
// returns the block's extra environment (the stand-in systemctl first on
// PATH) and what must run right after the block, inside its window: the
// kubelet restarted, once, and naming want as its clusterDNS.
func nodeDNSStep(ctx context.Context, n *Node, binDir, kubectl, want string) (env []string, then func() error, err error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(binDir, "systemctl"), []byte(systemctlStandIn), 0o755); err != nil {
		return nil, nil, err
	}
	log := filepath.Join(binDir, "systemctl-"+n.Name+".log")
	if err := os.RemoveAll(log); err != nil {
		return nil, nil, err
	}
	env = []string{
		"PATH=" + strings.Join([]string{binDir, filepath.Dir(kubectl), os.Getenv("PATH")}, string(os.PathListSeparator)),
		"SYSTEMCTL_LOG=" + log,
	}
	then = func() error {
		asked, err := os.ReadFile(log)
		if err != nil {
			return fmt.Errorf("the block never ran systemctl: %w", err)
		}
		if string(asked) != "restart kubelet\n" {
			return fmt.Errorf("systemctl asked for %q, not one `restart kubelet`", asked)
		}
		if err := n.RestartKubelet(ctx); err != nil {
			return err
		}
		if n.ClusterDNS != want {
			return fmt.Errorf("%s: the kubelet's clusterDNS is %s after the block, want %s", n.Name, n.ClusterDNS, want)
		}
		return nil
	}
	return env, then, nil
}

// checkResolver: the caller pod's /etc/resolv.conf names want as its only
// name server, and a query through it answers the probe Service's name.
func checkResolver(ctx context.Context, t *testing.T, op *Operator, caller, want string) {
	t.Helper()
	if err := resolverAnswers(ctx, op, caller, want); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: resolv.conf names %s only, which answers %s", caller, want, probeName)
}

// resolverAnswers is checkResolver's check, its failure returned (for a
// goroutine, which may not end the test).
func resolverAnswers(ctx context.Context, op *Operator, caller, want string) error {
	out, err := op.Run(ctx, "exec", caller, "--", "cat", "/etc/resolv.conf")
	if err != nil {
		return err
	}
	var servers []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
			servers = append(servers, f[1])
		}
	}
	if len(servers) != 1 || servers[0] != want {
		return fmt.Errorf("%s, created after its kubelet's clusterDNS moved to %s, resolves through %v:\n%s", caller, want, servers, out)
	}
	return testwait.Until(ctx, 0, caller+": dig "+probeName+" through "+want+" answers", func(ctx context.Context) error {
		out, err := op.Run(ctx, "exec", caller, "--", "dig", "+short", "+time=2", "+tries=1", probeName)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return fmt.Errorf("no answer")
		}
		return nil
	})
}
