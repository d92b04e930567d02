package testnet

import (
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

func TestFreePortIsBindableAndNotEphemeral(t *testing.T) {
	low, err := ephemeralLow()
	if err != nil {
		testenv.Missing(t, "no ephemeral range to compare with: %v", err)
	}
	seen := map[int]bool{}
	for range 20 {
		port, err := FreePort("127.0.0.1", true)
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if low >= portsTo && (port < portsFrom || port >= portsTo) {
			t.Fatalf("port %d outside [%d, %d) although the ephemeral range starts at %d", port, portsFrom, portsTo, low)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("TCP %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("UDP %s: %v", addr, err)
		}
		u.Close()
		l.Close()
	}
}

// TestFreePortSkipsAnotherProcesssPort: a port this process handed out is
// never handed out by another test process, even where that one's walk
// starts on it (the helper, this test binary run again, starts there).
func TestFreePortSkipsAnotherProcesssPort(t *testing.T) {
	if low, err := ephemeralLow(); err != nil || low < portsTo {
		testenv.Missing(t, "the ephemeral range overlaps the test ports: FreePort falls back to kernel-chosen ports")
	}
	port, err := FreePort("127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFreePortFrom$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTNET_HELPER_START="+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`handed out (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("helper said no port:\n%s", out)
	}
	if got, _ := strconv.Atoi(string(m[1])); got == port {
		t.Errorf("the helper process was handed %d, which this process holds", got)
	}
}

// TestHelperFreePortFrom is TestFreePortSkipsAnotherProcesssPort's other
// process: its walk starts at TESTNET_HELPER_START.
func TestHelperFreePortFrom(t *testing.T) {
	start, err := strconv.Atoi(os.Getenv("TESTNET_HELPER_START"))
	if err != nil {
		t.Skip("run by TestFreePortSkipsAnotherProcesssPort")
	}
	ports.Lock()
	ports.next = start
	ports.Unlock()
	port, err := FreePort("127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("handed out %d", port)
}
