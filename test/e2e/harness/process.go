package harness

import (
	"os/exec"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// Process is one program the harness started (kube-proxy, wrapper, CoreDNS,
// controller): controlplane's runner, in its own process group, dying with
// the harness.
type Process = controlplane.Process

// startProcess starts cmd with its output in dir/name.log.
func startProcess(name string, cmd *exec.Cmd, dir string) (*Process, error) {
	return controlplane.StartProcess(name, cmd, dir)
}
