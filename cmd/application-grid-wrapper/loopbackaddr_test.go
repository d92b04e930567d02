package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// loopbackHelperEnv makes the test binary act as the init container (see
// TestHelperLoopbackAddress).
const loopbackHelperEnv = "WRAPPER_LOOPBACK_HELPER"

// TestAddLoopbackAddressWithNetAdminOnly runs --add-loopback-address as
// the shipped init container does, root with CAP_NET_ADMIN as its only
// capability, in a network namespace of its own: the address lands on lo,
// a second run (the pod started again) changes nothing and succeeds, and
// without CAP_NET_ADMIN the same run is refused.
func TestAddLoopbackAddressWithNetAdminOnly(t *testing.T) {
	tools := initContainerTools(t, "setpriv", "ip", "nsenter")
	setpriv, ip, nsenter := tools[0], tools[1], tools[2]
	ns := fmt.Sprintf("sg-lo-test-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "delete", ns).Run() })
	addAs := func(caps, prefix string) ([]byte, error) {
		return asInitContainer(setpriv, []string{nsenter, "--net=/run/netns/" + ns, "--"}, caps, "TestHelperLoopbackAddress", loopbackHelperEnv+"="+prefix)
	}
	loAddrs := func() string {
		out, err := exec.Command(ip, "-n", ns, "-o", "address", "show", "dev", "lo").CombinedOutput()
		if err != nil {
			t.Fatalf("ip address show: %v\n%s", err, out)
		}
		return string(out)
	}

	if out, err := addAs("", "169.254.20.10/32"); err == nil {
		t.Fatalf("added an address without CAP_NET_ADMIN:\n%s", out)
	}
	if strings.Contains(loAddrs(), "169.254.20.10") {
		t.Fatal("the address is on lo after a refused run")
	}
	for _, run := range []string{"first start", "restart"} {
		if out, err := addAs(",+net_admin", "169.254.20.10/32"); err != nil {
			t.Fatalf("%s: %v\n%s", run, err, out)
		}
		if got := loAddrs(); strings.Count(got, "inet 169.254.20.10/32 ") != 1 {
			t.Fatalf("%s: lo has, want 169.254.20.10/32 once:\n%s", run, got)
		}
	}
}

// TestHelperLoopbackAddress is the init container's process for the test
// above.
func TestHelperLoopbackAddress(t *testing.T) {
	prefix := os.Getenv(loopbackHelperEnv)
	if prefix == "" {
		t.Skip("run by TestAddLoopbackAddressWithNetAdminOnly")
	}
	if err := run(t.Context(), []string{"application-grid-wrapper", "--add-loopback-address", prefix}); err != nil {
		t.Fatal(err)
	}
}

// TestAddLoopbackAddressRefusesBadInput: anything but one unicast address
// with its full prefix length is refused before the interface is touched.
func TestAddLoopbackAddressRefusesBadInput(t *testing.T) {
	for _, bad := range []string{"169.254.20.10", "169.254.20.0/24", "127.0.0.2/32", "0.0.0.0/32", "224.0.0.1/32", "::1/128", "not-an-address/32"} {
		err := run(t.Context(), []string{"application-grid-wrapper", "--add-loopback-address", bad})
		if err == nil || !strings.Contains(err.Error(), "--add-loopback-address") {
			t.Errorf("--add-loopback-address %q: %v, want a refusal naming the flag", bad, err)
		}
	}
}
