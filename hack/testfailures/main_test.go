package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFailuresNameTheInnermostTestAndWhy(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"example.com/p","Test":"TestA"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    a_test.go:10: the traffic table (failed of all attempts)\n"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    with_retry.go:234: I1130 got a Retry-After, error soon\n"}`,
		`{"Action":"output","Package":"example.com/p","Test":"TestA/sub","Output":"    a_test.go:12: doctor: [\"x missing\"]\n"}`,
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
    a_test.go:10: the traffic table (failed of all attempts)
    a_test.go:14: client-node1: 1 of 47 Service requests failed
    a_test.go:12: doctor: ["x missing"]
--- FAIL: package example.com/q (outside its tests)
    panic: test timed out after 30m0s
    FAIL	example.com/q	1800.1s
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
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
