package main

import (
	"flag"
	"io"
	"net"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/servicegroup/servicegroup/internal/testbin"
)

// parse is the command's flag parsing, without exiting on an error.
func parse(t *testing.T, args ...string) *options {
	t.Helper()
	o := newOptions()
	fs := flag.NewFlagSet("application-grid-controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return o
}

// TestValidate: every flag's bad values are refused with a message naming
// the flag, the value and the rule; every bad flag of a command line is
// reported at once; values that are only bad together with another flag
// are accepted when that flag makes them unused.
func TestValidate(t *testing.T) {
	label := func(v string) string { return validation.IsDNS1123Label(v)[0] }
	subdomain := func(v string) string { return validation.IsDNS1123Subdomain(v)[0] }
	const caNamesNeed = "needs --secure-metrics-bind-address and --metrics-serving-signer (which publishes the CA), and no --secure-metrics-tls-cert-file"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--workers=0"}, `--workers: Invalid value: 0: must be at least 1`},
		{[]string{"--kube-api-qps=NaN"}, `--kube-api-qps: Invalid value: NaN: must be a finite number`},
		{[]string{"--kube-api-qps=1e300"}, `--kube-api-qps: Invalid value: 1e+300: must be a finite number`},
		{[]string{"--kube-api-qps=-1"}, ""}, // client-go: no client-side rate limit
		{[]string{"--kube-api-burst=-1"}, `--kube-api-burst: Invalid value: -1: must not be negative`},
		{[]string{"--resync=-1s"}, `--resync: Invalid value: "-1s": must not be negative`},
		{[]string{"--resync=0"}, ""},
		{[]string{"--leader-elect-retry-period=0"}, `--leader-elect-retry-period: Invalid value: "0s": must be greater than zero`},
		{[]string{"--leader-elect=false", "--leader-elect-retry-period=0"}, `--leader-elect-retry-period: Invalid value: "0s": must be greater than zero`},
		{[]string{"--leader-elect-lease-duration=0"}, `--leader-elect-lease-duration: Invalid value: "0s": must be greater than zero`},
		{[]string{"--leader-elect-renew-deadline=-1s"}, `--leader-elect-renew-deadline: Invalid value: "-1s": must be greater than zero`},
		{[]string{"--leader-elect-lease-duration=5s"}, `--leader-elect-lease-duration: Invalid value: "5s": must be greater than --leader-elect-renew-deadline (10s)`},
		{[]string{"--leader-elect-renew-deadline=2s"}, `--leader-elect-renew-deadline: Invalid value: "2s": must be greater than 1.2 times --leader-elect-retry-period (2.4s)`},
		{[]string{"--leader-elect-namespace=Bad_NS"}, `--leader-elect-namespace: Invalid value: "Bad_NS": ` + label("Bad_NS")},
		{[]string{"--leader-elect-name="}, `--leader-elect-name: Invalid value: "": ` + subdomain("")},
		{[]string{"--leader-elect=false", "--leader-elect-lease-duration=0", "--leader-elect-renew-deadline=0", "--leader-elect-name="}, ""},
		{[]string{"--crd-check-interval=0"}, `--crd-check-interval: Invalid value: "0s": must be greater than zero`},
		{[]string{"--manage-crds=false", "--crd-check-interval=0"}, ""},
		{[]string{"--nodeunit-deletion-grace-period=-1m"}, `--nodeunit-deletion-grace-period: Invalid value: "-1m0s": must not be negative`},
		{[]string{"--nodeunit-deletion-grace-period=0"}, ""},
		{[]string{"--node-label-summary-delay=-1ms"}, `--node-label-summary-delay: Invalid value: "-1ms": must not be negative`},
		{[]string{"--node-label-summary-delay=0"}, ""},
		{[]string{"--grid-status-delay=-1ms"}, `--grid-status-delay: Invalid value: "-1ms": must not be negative`},
		{[]string{"--grid-status-delay=0"}, ""},
		{[]string{"--superedge-lock="}, ""},
		{[]string{"--superedge-lock=kube-system"}, `--superedge-lock: Invalid value: "kube-system": want namespace/name`},
		{[]string{"--superedge-lock=/x"}, `--superedge-lock: Invalid value: "/x": want namespace/name`},
		{[]string{"--superedge-lock=Kube/x"}, `--superedge-lock: Invalid value: "Kube/x": namespace "Kube": ` + label("Kube")},
		{[]string{"--superedge-lock=ns/Bad_Name"}, `--superedge-lock: Invalid value: "ns/Bad_Name": name "Bad_Name": ` + subdomain("Bad_Name")},
		{[]string{"--zone-from-grid-key=zone1"}, ""},
		{[]string{"--zone-from-grid-key=topology.kubernetes.io/zone"}, `--zone-from-grid-key: Invalid value: "topology.kubernetes.io/zone": topology.kubernetes.io/zone is the zone label itself: leave the flag empty, grids keyed on it need no zone writer`},
		{[]string{"--zone-from-grid-key=a b"}, `--zone-from-grid-key: Invalid value: "a b": not a label key: ` + validation.IsQualifiedName("a b")[0]},
		{[]string{"--metrics-bind-address=8080"}, `--metrics-bind-address: Invalid value: "8080": must be host:port, or "0" to turn it off`},
		{[]string{"--metrics-bind-address=0", "--health-bind-address="}, ""},
		{[]string{"--health-bind-address=:99999"}, `--health-bind-address: Invalid value: ":99999": port must be a number from 0 to 65535`},
		{[]string{"--secure-metrics-bind-address=127.0.0.1"}, `--secure-metrics-bind-address: Invalid value: "127.0.0.1": must be host:port, or "0" to turn it off`},
		{[]string{"--secure-metrics-tls-cert-file=x.crt"}, `--secure-metrics-tls-private-key-file: Required value: --secure-metrics-tls-cert-file and --secure-metrics-tls-private-key-file go together`},
		{[]string{"--secure-metrics-tls-private-key-file=x.key"}, `--secure-metrics-tls-cert-file: Required value: --secure-metrics-tls-cert-file and --secure-metrics-tls-private-key-file go together`},
		{[]string{"--secure-metrics-bind-address=:8443", "--metrics-serving-signer", "--secure-metrics-ca-dns-names=m.ns.svc, m.ns.svc.cluster.local"}, ""},
		{[]string{"--metrics-serving-signer", "--secure-metrics-ca-dns-names=m.ns.svc"}, `--secure-metrics-ca-dns-names: Invalid value: "m.ns.svc": ` + caNamesNeed},
		{[]string{"--secure-metrics-bind-address=:8443", "--secure-metrics-ca-dns-names=m.ns.svc"}, `--secure-metrics-ca-dns-names: Invalid value: "m.ns.svc": ` + caNamesNeed},
		{[]string{"--secure-metrics-bind-address=:8443", "--metrics-serving-signer", "--secure-metrics-tls-cert-file=x.crt", "--secure-metrics-tls-private-key-file=x.key", "--secure-metrics-ca-dns-names=m.ns.svc"},
			`--secure-metrics-ca-dns-names: Invalid value: "m.ns.svc": ` + caNamesNeed},
		{[]string{"--secure-metrics-bind-address=:8443", "--metrics-serving-signer", "--secure-metrics-ca-dns-names=m.ns.svc,Bad_Name"}, `--secure-metrics-ca-dns-names: Invalid value: "Bad_Name": ` + subdomain("Bad_Name")},
		{[]string{"--logging-format=xml"}, `--logging-format: Invalid value: "xml": Unsupported log format`},
		{[]string{"--log-flush-frequency=0"}, `--log-flush-frequency: Invalid value: "0s": Must be greater than zero`},
		{[]string{"--workers=0", "--superedge-lock=x", "--health-bind-address=x"}, `[` +
			`--workers: Invalid value: 0: must be at least 1, ` +
			`--superedge-lock: Invalid value: "x": want namespace/name, ` +
			`--health-bind-address: Invalid value: "x": must be host:port, or "0" to turn it off]`},
	} {
		got := ""
		if err := parse(t, tc.args...).Validate(); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
}

// TestBadFlagStartsNothing: the command with a bad flag exits 2 with the
// message, before it reads the kubeconfig (which does not exist) or binds
// its endpoints (whose address is taken: binding would fail otherwise).
func TestBadFlagStartsNothing(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd := testbin.StartSelf(t, "RUN_APPLICATION_GRID_CONTROLLER", "--kubeconfig", "/nonexistent/kubeconfig",
		"--metrics-bind-address", taken.Addr().String(), "--workers", "0")
	if code := cmd.Wait(t); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	const want = "application-grid-controller: --workers: Invalid value: 0: must be at least 1\n"
	if log := cmd.Log(t); log != want {
		t.Errorf("output %q, want %q", log, want)
	}
}
