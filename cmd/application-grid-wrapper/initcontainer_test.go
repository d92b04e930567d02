package main

import (
	"os"
	"os/exec"
	"testing"
)

// initContainerTools skips t unless it runs as root (as the init containers
// do) and finds every one of tools; it returns their paths, in order.
func initContainerTools(t *testing.T, tools ...string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	paths := make([]string, len(tools))
	for i, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found", tool)
		}
		paths[i] = p
	}
	return paths
}

// asInitContainer runs the test binary's helper test as a shipped init
// container runs: root with only the capabilities in caps (",+chown";
// setpriv empties the bounding and inheritable sets), after prefix (e.g.
// nsenter into a network namespace), with env added.
func asInitContainer(setpriv string, prefix []string, caps, helperTest string, env ...string) ([]byte, error) {
	args := append(append([]string{}, prefix...), setpriv, "--bounding-set=-all"+caps, "--inh-caps=-all", "--",
		os.Args[0], "-test.run=^"+helperTest+"$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}
