package realnode

import (
	"slices"
	"testing"
)

func TestConntrackCounters(t *testing.T) {
	stat := `entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
0000001a  00000000 00000005 00000000 00000002 00000000 00000000 00000000 00000000 00000001 00000000 00000000 00000000  00000000 00000000 00000000 00000000
0000001a  00000000 00000007 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000  00000000 00000000 00000000 00000010
`
	got := conntrackCounters(stat)
	want := []string{"conntrack invalid=3", "conntrack insert_failed=1", "conntrack search_restart=16"}
	if !slices.Equal(got, want) {
		t.Errorf("conntrackCounters = %q, want %q", got, want)
	}
}

func TestLinkDrops(t *testing.T) {
	js := `[{"ifname":"lo","stats64":{"rx":{"bytes":1,"packets":1,"errors":0,"dropped":0},"tx":{"bytes":1,"packets":1,"errors":0,"dropped":0}}},
{"ifname":"cni0","stats64":{"rx":{"bytes":9,"packets":9,"errors":0,"dropped":4,"missed":0},"tx":{"bytes":9,"packets":9,"errors":0,"dropped":0,"carrier_errors":2}}}]`
	got := linkDrops([]byte(js))
	want := []string{"cni0 rx dropped=4", "cni0 tx carrier_errors=2"}
	if !slices.Equal(got, want) {
		t.Errorf("linkDrops = %q, want %q", got, want)
	}
}

func TestUnansweredFlows(t *testing.T) {
	failures := []string{
		`13:44:04.035 error=Get "http://10.96.44.158/": context deadline exceeded (Client.Timeout exceeded while awaiting headers) connected=no from=10.244.2.2:50950 tcp=SYN_SENT syns=3`,
		`13:44:05.100 error=Get "http://10.96.44.158/": dial tcp 10.96.44.158:80: connect: connection refused connected=no`,
		`13:44:06.000 error=Get "http://10.96.44.158/": context deadline exceeded connected=1ms from=10.244.2.2:50960 wrote=2ms`,
		`13:44:04.035 error=again connected=no from=10.244.2.2:50950 tcp=SYN_SENT syns=3`,
		`13:44:09.000 error=timeout connected=no from=10.244.1.7:40000 tcp=SYN_SENT syns=2`,
	}
	got := unansweredFlows(failures)
	want := [][2]string{{"10.244.2.2", "50950"}, {"10.244.1.7", "40000"}}
	if !slices.Equal(got, want) {
		t.Errorf("unansweredFlows = %q, want %q", got, want)
	}
}
