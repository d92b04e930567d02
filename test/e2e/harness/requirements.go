package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Tool is a program the end-to-end cluster needs and the Debian package that
// provides it.
type Tool struct {
	Command string
	Package string
}

// Tools the harness runs. The demo installs missing packages; tests only
// name them.
var (
	ToolIP        = Tool{"ip", "iproute2"}
	ToolIPTables  = Tool{"iptables", "iptables"}
	ToolNFT       = Tool{"nft", "nftables"}
	ToolConntrack = Tool{"conntrack", "conntrack"}
	ToolDig       = Tool{"dig", "dnsutils"}
)

// AllTools is every tool used by the full run (iptables and nftables modes).
var AllTools = []Tool{ToolIP, ToolIPTables, ToolNFT, ToolConntrack, ToolDig}

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
		return fmt.Errorf("needs %q (Debian package %s)", m[0].Command, m[0].Package)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
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
