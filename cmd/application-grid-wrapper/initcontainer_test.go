package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

// initContainerTools requires root (as the init containers run) and every
// one of tools (testenv: a skip outside CI, a failure under it); it returns
// their paths, in order.
func initContainerTools(t *testing.T, tools ...string) []string {
	t.Helper()
	testenv.Root(t, "the init containers run as root")
	return testenv.Tools(t, tools...)
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
