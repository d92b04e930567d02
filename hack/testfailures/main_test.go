package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestFailuresNameTheInnermostTestAndWhy(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"example.com/p","Test":"TestA"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    a_test.go:10: the traffic table (failed of all attempts)\n"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    with_retry.go:234: I1130 got a Retry-After, error soon\n"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    a_test.go:12: doctor: got [\"x missing\"], want none\n"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    a_test.go:14: client-node1: 1 of 47 Service requests failed\n"}`,
		`{"Action":"fail","Package":"example.com/p","Test":"TestA/sub"}`,
		`{"Action":"fail","Package":"example.com/p","Test":"TestA"}`,
		`{"Action":"pass","Package":"example.com/p","Test":"TestB"}`,
		`{"Action":"fail","Package":"example.com/p"}`,
		`{"Action":"output","Package":"example.com/q","Output":"panic: test timed out after 30m0s\n"}`,
		`{"Action":"output","Package":"example.com/q","Output":"FAIL\texample.com/q\t1800.1s\n"}`,
		`{"Action":"fail","Package":"example.com/q"}`,
	}, "\n")
	events, err := readEvents(strings.NewReader("gotestsum's own line\n" + in))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, failures(events))
	want := `>> what failed (2; the whole output above says more)
--- FAIL: TestA/sub (example.com/p)
    a_test.go:12: doctor: got ["x missing"], want none
    a_test.go:14: client-node1: 1 of 47 Service requests failed
--- FAIL: package example.com/q (outside its tests)
    panic: test timed out after 30m0s
    FAIL	example.com/q	1800.1s
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A long test logs tables and findings saying "failed" long before the
// error that ends it: the latest lines are kept, its last log line always.
func TestFailuresKeepTheLatestLines(t *testing.T) {
	var in []string
	line := func(text string) {
		in = append(in, `{"Action":"output","Package":"p","Test":"TestLong","Output":"    long_test.go:1: `+text+`\n"}`)
	}
	for i := range 8 {
		line(fmt.Sprintf("step %d: 0 of 40 requests failed", i))
	}
	line("dead-node: curl failed: connection refused after 0 ms")
	line("stopping the cluster")
	in = append(in, `{"Action":"fail","Package":"p","Test":"TestLong"}`)
	events, err := readEvents(strings.NewReader(strings.Join(in, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	got := failures(events)
	if len(got) != 1 {
		t.Fatalf("got %d failures, want 1: %+v", len(got), got)
	}
	want := []string{
		"long_test.go:1: step 4: 0 of 40 requests failed",
		"long_test.go:1: step 5: 0 of 40 requests failed",
		"long_test.go:1: step 6: 0 of 40 requests failed",
		"long_test.go:1: step 7: 0 of 40 requests failed",
		"long_test.go:1: dead-node: curl failed: connection refused after 0 ms",
		"long_test.go:1: stopping the cluster",
	}
	if !slices.Equal(got[0].Why, want) {
		t.Errorf("why:\n%s\nwant:\n%s", strings.Join(got[0].Why, "\n"), strings.Join(want, "\n"))
	}
}

func TestNoFailuresPrintNothing(t *testing.T) {
	events, err := readEvents(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, failures(events))
	if out.Len() != 0 {
		t.Errorf("printed %q for a run without failures", out.String())
	}
}

// A table's header and a program's findings say "failed" inside
// parentheses or quotes, after the error: the error is kept.
func TestFailuresSkipFailInQuotesAndParentheses(t *testing.T) {
	var in []string
	line := func(text string) {
		in = append(in, fmt.Sprintf(`{"Action":"output","Package":"p","Test":"TestRN","Output":%q}`, "    rn_test.go:1: "+text+"\n"))
	}
	line(`install-node: client-node2: 1 of 60 Service requests failed (at 02:06:14 error=Get "http://10.96.0.1/": dial tcp 10.96.0.1:80: i/o timeout (Client.Timeout exceeded))`)
	for i := range 6 {
		line(fmt.Sprintf("traffic during step %d (failed of all attempts, longest gap):", i))
		line(fmt.Sprintf(`doctor, a dead node (%dms): ["nodeunit x: 1/2 nodes unreachable: failed nodes, evicted"]`, i))
	}
	line("run directory kept")
	in = append(in, `{"Action":"fail","Package":"p","Test":"TestRN"}`)
	events, err := readEvents(strings.NewReader(strings.Join(in, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	fs := failures(events)
	if len(fs) != 1 || !slices.ContainsFunc(fs[0].Why, func(l string) bool { return strings.HasPrefix(l, "rn_test.go:1: install-node: client-node2: 1 of 60") }) {
		t.Errorf("why %q, want it to hold the failed requests' line", fs)
	}
	for _, l := range fs[0].Why {
		if strings.Contains(l, "traffic during") || strings.Contains(l, "doctor, a dead node") {
			t.Errorf("why holds a log line that says fail only in parentheses or quotes: %q", l)
		}
	}
}
