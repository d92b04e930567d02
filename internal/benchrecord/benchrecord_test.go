package benchrecord

import (
	"strings"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	got := Render(Result{
		Name:      "BenchmarkHandlerModes",
		Date:      time.Date(2026, 11, 29, 16, 50, 7, 0, time.UTC),
		Commit:    "28c5b00-dirty",
		GoVersion: "go1.26.8",
		MaxProcs:  2,
		LoadStart: "1.50 2.00 3.00",
		LoadEnd:   "1.75 2.10 3.00",
		Command:   "go test -run '^$' -bench '^BenchmarkHandlerModes$' -benchtime=1000x ./plugin/gridhosts/",
		Iter:      1,
		Figures: []Figure{
			{"1000/hosts", 12345.6, "ns/op"},
			{"allocs-ratio", 0.83333, "ratio"},
		},
	})
	want := "### Latest result\n\n" +
		"- Benchmark: `BenchmarkHandlerModes`, b.N=1\n" +
		"- Date: 2026-11-29 16:50 UTC\n" +
		"- Commit: `28c5b00-dirty`\n" +
		"- Go: go1.26.8, GOMAXPROCS=2\n" +
		"- Load average (1, 5, 15 min): 1.50 2.00 3.00 at start, 1.75 2.10 3.00 at end\n" +
		"- Command: `go test -run '^$' -bench '^BenchmarkHandlerModes$' -benchtime=1000x ./plugin/gridhosts/`\n" +
		"\n| Figure | Value | Unit |\n|---|---:|---|\n" +
		"| 1000/hosts | 12346 | ns/op |\n" +
		"| allocs-ratio | 0.8333 | ratio |\n"
	if got != want {
		t.Errorf("Render:\n%s\nwant:\n%s", got, want)
	}
}

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name, pkg string
		flags     []Flag
		want      string
	}{
		{"BenchmarkFleet", "wrapper", []Flag{{"benchtime", "1x"}, {"v", "true"}},
			"go test -run '^$' -bench '^BenchmarkFleet$' -benchtime=1x -v ./wrapper/"},
		{"BenchmarkSnapshot/objects=1000", "plugin/gridhosts", []Flag{{"benchtime", "5x"}, {"count", "4"}},
			"go test -run '^$' -bench '^BenchmarkSnapshot$/^objects=1000$' -benchtime=5x -count=4 ./plugin/gridhosts/"},
		{"BenchmarkX", ".", nil, "go test -run '^$' -bench '^BenchmarkX$' ."},
	} {
		if got := Command(tc.name, tc.pkg, tc.flags); got != tc.want {
			t.Errorf("Command(%q, %q) = %q, want %q", tc.name, tc.pkg, got, tc.want)
		}
	}
}

func TestReplaceBlock(t *testing.T) {
	start, end := Markers("BenchmarkX")
	page := "# X\n\nSome text.\n"
	first := ReplaceBlock(page, "BenchmarkX", "### Latest result\n\nold\n")
	wantFirst := "# X\n\nSome text.\n\n" + start + "\n### Latest result\n\nold\n" + end + "\n"
	if first != wantFirst {
		t.Fatalf("markers absent: got\n%q\nwant\n%q", first, wantFirst)
	}

	// A second run replaces only its own block; text after it and another
	// benchmark's block stay.
	other := ReplaceBlock(first+"\nTrailing text.\n", "BenchmarkY", "y block\n")
	second := ReplaceBlock(other, "BenchmarkX", "### Latest result\n\nnew\n")
	if strings.Contains(second, "old") || strings.Count(second, start) != 1 || strings.Count(second, end) != 1 {
		t.Fatalf("block not replaced once:\n%s", second)
	}
	wantSecond := strings.Replace(other, "\nold\n", "\nnew\n", 1)
	if second != wantSecond {
		t.Fatalf("replace: got\n%q\nwant\n%q", second, wantSecond)
	}

	// A page with no trailing newline still gets its block on its own lines.
	if got := ReplaceBlock("# X", "BenchmarkX", "b"); got != "# X\n\n"+start+"\nb\n"+end+"\n" {
		t.Fatalf("no trailing newline: %q", got)
	}
	// A start marker with no end is treated as absent, never eats the page.
	broken := "# X\n" + start + "\nkept\n"
	if got := ReplaceBlock(broken, "BenchmarkX", "b"); !strings.HasPrefix(got, broken) {
		t.Fatalf("unterminated marker lost text: %q", got)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{3: "3", 0.5: "0.5", 1.23456: "1.235", 123456.7: "123457", 0.000123456: "0.0001235"} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}
