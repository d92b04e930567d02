package harness

import (
	"fmt"
	"os"
	"strings"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// Shipped Corefiles (corefile/ in the repository), run as-is apart from what
// a test machine must change.
const (
	CorefileNode    = "Corefile.node"
	CorefileClients = "Corefile.clients"
)

// adaptCorefile turns a shipped Corefile into one for the test cluster,
// changing only what differs from a real cluster:
//   - `bind IP` inside the server block: answer on the namespace's address;
//   - `kubeconfig PATH` in the gridhosts and kubernetes blocks (the shipped
//     `kubeconfig` and `services_kubeconfig` lines dropped: it reads
//     everything there), unless kubeconfig is "": then the shipped lines
//     stay (the node CoreDNS reads through its node's wrapper, as the
//     shipped DaemonSet does, and with in-cluster config where the Corefile
//     names no kubeconfig; the caller maps their paths onto the node's
//     files); the shared one has no such manifest;
//   - no `forward` block: nothing may leave the machine (upstream resolvers
//     are unreachable from the test namespaces anyway);
//   - health, ready and prometheus on 127.0.0.1: the player's pods share the
//     node's namespace (a real pod has its own), and a wildcard :8080 would
//     take their port;
//   - gridhosts' `snapshot PATH`: snapshot, the shipped path mapped onto the
//     node's directory for the DaemonSet's hostPath (node CoreDNS), or a file
//     of the process under the test's directory (shared CoreDNS).
//
// Anything else ({$NODE_NAME}, cache, loop, reload, lameduck) runs as shipped. A Corefile whose shape it does not recognise
// is an error, not a silent fallback.
func adaptCorefile(shipped, bindIP, kubeconfig, snapshot string) (string, error) {
	var out []string
	var sawServer, sawGridhosts, sawKubernetes bool
	skipDepth := 0
	for _, line := range strings.Split(shipped, "\n") {
		trimmed := strings.TrimSpace(line)
		if skipDepth > 0 {
			skipDepth += strings.Count(trimmed, "{") - strings.Count(trimmed, "}")
			continue
		}
		if strings.HasPrefix(trimmed, "forward ") {
			if strings.HasSuffix(trimmed, "{") {
				skipDepth = 1
			}
			continue
		}
		// The shipped node-local address: this harness binds bindIP. The
		// node's wrapper kubeconfigs (gridhosts' Services and EndpointSlices
		// too) give way to the harness's credentials, if any, below.
		if f := strings.Fields(trimmed); len(f) > 0 && (f[0] == "bind" || kubeconfig != "" && (f[0] == "kubeconfig" || f[0] == "services_kubeconfig")) {
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		switch fields := strings.Fields(trimmed); {
		case len(fields) > 0 && fields[0] == "health":
			line = indent + "health " + coreDNSHealthAddr + suffix(dropAddr(fields[1:]))
		case len(fields) > 0 && fields[0] == "ready":
			line = indent + "ready " + coreDNSReadyAddr + suffix(dropAddr(fields[1:]))
		case len(fields) > 0 && fields[0] == "prometheus":
			line = indent + "prometheus " + coreDNSMetricsAddr + suffix(dropAddr(fields[1:]))
		case len(fields) > 1 && fields[0] == "snapshot":
			line = indent + "snapshot " + snapshot + suffix(fields[2:])
		}
		out = append(out, line)
		switch {
		case !sawServer && strings.HasSuffix(trimmed, "{") && strings.HasPrefix(trimmed, "."):
			sawServer = true
			out = append(out, "    bind "+bindIP)
		case strings.HasPrefix(trimmed, "gridhosts") && strings.HasSuffix(trimmed, "{"):
			sawGridhosts = true
			if kubeconfig != "" {
				out = append(out, "        kubeconfig "+kubeconfig)
			}
		case strings.HasPrefix(trimmed, "kubernetes") && strings.HasSuffix(trimmed, "{"):
			sawKubernetes = true
			if kubeconfig != "" {
				out = append(out, "        kubeconfig "+kubeconfig)
			}
		}
	}
	if !sawServer || !sawGridhosts || !sawKubernetes {
		return "", fmt.Errorf("shipped Corefile not in the expected shape (server block %v, gridhosts block %v, kubernetes block %v)", sawServer, sawGridhosts, sawKubernetes)
	}
	return strings.Join(out, "\n"), nil
}

// readShippedCorefile returns corefile/NAME of this checkout, or "" if the
// checkout has none.
func readShippedCorefile(name string) (string, error) {
	data, err := testbin.ReadRepoFile("corefile", name)
	if os.IsNotExist(err) {
		return "", nil
	}
	return string(data), err
}

// dropAddr removes a leading listen address from a directive's arguments,
// keeping an opening brace.
func dropAddr(args []string) []string {
	if len(args) > 0 && args[0] != "{" {
		return args[1:]
	}
	return args
}

func suffix(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " " + strings.Join(args, " ")
}
