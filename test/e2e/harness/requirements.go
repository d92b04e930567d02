package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
)

// Tool is a program the end-to-end cluster needs. Which Debian package
// provides it is listed once, in hack/host-packages.txt, which
// hack/host-deps.sh installs for `make test`, `make demo` and CI.
type Tool struct {
	Command string
}

// Package is the Debian package that provides t, from hack/host-packages.txt.
func (t Tool) Package() string {
	if pkg, ok := hostPackages()[t.Command]; ok {
		return pkg
	}
	return "(not in hack/host-packages.txt)"
}

// Tools the harness runs.
var (
	ToolIP        = Tool{"ip"}
	ToolIPTables  = Tool{"iptables"}
	ToolNFT       = Tool{"nft"}
	ToolConntrack = Tool{"conntrack"}
	ToolDig       = Tool{"dig"}
)

// AllTools is every tool used by the full run (iptables and nftables modes).
var AllTools = []Tool{ToolIP, ToolIPTables, ToolNFT, ToolConntrack, ToolDig}

// hostPackages reads hack/host-packages.txt: command -> Debian package.
var hostPackages = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	data, err := testbin.ReadRepoFile("hack", "host-packages.txt")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			out[f[0]] = f[1]
		}
	}
	return out
})

// MissingTools lists the tools not found in PATH.
func MissingTools(tools ...Tool) []Tool {
	var missing []Tool
	for _, t := range tools {
		if _, err := exec.LookPath(t.Command); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// CheckHost says why this machine cannot run the network-namespace cluster,
// or nil: it needs root, iproute2 and working `ip netns`.
func CheckHost(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, veths, kube-proxy's iptables)")
	}
	if m := MissingTools(ToolIP); len(m) > 0 {
		return fmt.Errorf("needs %q (Debian package %s; hack/host-deps.sh installs it)", m[0].Command, m[0].Package())
	}
	// The bound only ends a probe that hangs: 10 s ran out for `ip netns
	// add` once, at a load of 54 on a 2-core machine (a real node's mounts
	// beside it), and failed a test on a machine that runs them.
	ctx, cancel := context.WithTimeout(ctx, testwait.Floor)
	defer cancel()
	// One probe of this process's at a time: tests in parallel check too.
	fabricMu.Lock()
	defer fabricMu.Unlock()
	probe := fmt.Sprintf("%s%d-probe", namePrefix, os.Getpid())
	if err := ipCmd(ctx, "netns", "add", probe); err != nil {
		return fmt.Errorf("network namespaces unsupported here: %w", err)
	}
	defer ipCmd(ctx, "netns", "del", probe) //nolint:errcheck // best effort
	if err := ipCmd(ctx, "-n", probe, "link", "add", "probe-br", "type", "bridge"); err != nil {
		return fmt.Errorf("bridges unsupported inside network namespaces: %w", err)
	}
	return nil
}
