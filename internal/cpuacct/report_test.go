package cpuacct

import (
	"strings"
	"testing"
	"time"
)

// TestSummarize checks the account's arithmetic: CPU summed per package
// (a package run twice counts twice), wall from go test's package events
// when they have it, the test binaries' total, and the rest of the whole
// run.
func TestSummarize(t *testing.T) {
	self := func(s float64) *float64 { return &s }
	records := []Record{
		{Package: "m/a", User: 60, System: 30, Wall: 100, Self: self(45)},
		{Package: "m/b", User: 6, System: 3, Wall: 20, Self: self(9)},
		{Package: "m/a", User: 30, System: 0, Wall: 50, Self: self(3)},
		{Package: "m/c", User: 1.5, System: 1.5, Wall: 400}, // no package event, own CPU unknown
	}
	events := strings.Join([]string{
		`{"Action":"run","Package":"m/a","Test":"TestX"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestX","Elapsed":99}`,
		`{"Action":"pass","Package":"m/a","Elapsed":140.5}`,
		`{"Action":"pass","Package":"m/a","Elapsed":9.5}`, // a second go test ran a test of it (NORACE_TESTS)
		`{"Action":"fail","Package":"m/b","Elapsed":21}`,
		`{"Action":"skip","Package":"m/d","Elapsed":0.5}`, // ran without the accounting
		`{"Action":"output","Package":"m/e","Output":"ok\n"}`,
	}, "\n")
	whole := Usage{User: 200 * time.Second, System: 70 * time.Second, Wall: 10 * time.Minute}
	s, err := Summarize(records, strings.NewReader(events), &whole)
	if err != nil {
		t.Fatal(err)
	}
	want := []PackageUsage{
		{Package: "m/c", Wall: 400 * time.Second, HasCPU: true,
			CPU: Usage{User: 1500 * time.Millisecond, System: 1500 * time.Millisecond, Wall: 400 * time.Second, SelfUnknown: true}},
		{Package: "m/a", Wall: 150 * time.Second, HasCPU: true,
			CPU: Usage{User: 90 * time.Second, System: 30 * time.Second, Wall: 150 * time.Second, Self: 48 * time.Second}},
		{Package: "m/b", Wall: 21 * time.Second, HasCPU: true,
			CPU: Usage{User: 6 * time.Second, System: 3 * time.Second, Wall: 20 * time.Second, Self: 9 * time.Second}},
		{Package: "m/d", Wall: 500 * time.Millisecond},
	}
	if len(s.Packages) != len(want) {
		t.Fatalf("packages %+v, want %+v", s.Packages, want)
	}
	for i := range want {
		if s.Packages[i] != want[i] {
			t.Errorf("package %d: %+v, want %+v", i, s.Packages[i], want[i])
		}
	}
	if wantTests := (Usage{User: 97500 * time.Millisecond, System: 34500 * time.Millisecond, Wall: 570 * time.Second,
		Self: 57 * time.Second, SelfUnknown: true}); s.Tests != wantTests {
		t.Errorf("tests %+v, want %+v", s.Tests, wantTests)
	}

	var out strings.Builder
	if err := s.Write(&out, 3); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"   400.0      0.05         -  m/c",
		"   150.0      2.00      0.80  m/a",
		"    21.0      0.15      0.15  m/b",
		"test binaries of 3 packages: 2.2 (user 1.6, sys 0.6), at least 0.9 of it in the binaries' own processes",
		// 270 s in all, 132 s of it the test binaries': 138 s = 2.3 min.
		"whole run: 4.5 (user 3.3, sys 1.2) in 10.0 minutes wall; compiling, building and the rest: 2.3",
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "m/d") {
		t.Errorf("report lists a fourth package with top 3:\n%s", out.String())
	}
}

// TestSummarizeWithoutAccounting: a run without records still lists the
// packages (no CPU for them) and leaves the whole run out when unknown.
func TestSummarizeWithoutAccounting(t *testing.T) {
	s, err := Summarize(nil, strings.NewReader(`{"Action":"pass","Package":"m/a","Elapsed":3}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := s.Write(&out, 10); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "     3.0         -         -  m/a\n") || strings.Contains(out.String(), "whole run") {
		t.Errorf("report:\n%s", out.String())
	}
}

func TestSummarizeBadEvents(t *testing.T) {
	if _, err := Summarize(nil, strings.NewReader("{\"Action\":\"pass\"}\nnot json\n"), nil); err == nil || !strings.Contains(err.Error(), "event 2") {
		t.Errorf("error %v, want one naming event 2", err)
	}
}
