package flagtable

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	flags := map[string]Flag{
		"addr":    {Name: "addr", Type: "string", Default: "127.0.0.1:1"},
		"timeout": {Name: "timeout", Type: "duration", Default: "1m30s"},
		"debug":   {Name: "debug"},
		"key":     {Name: "key", Type: "string"},
		"cert":    {Name: "cert", Type: "string"},
		"size":    {Name: "size", Type: "value", Default: "4Mi"},
	}
	readme := "# x\n\n| flag | default | meaning |\n| --- | --- | --- |\n" +
		"| `--addr` | `127.0.0.1:1` | listen |\n" +
		"| `--timeout` | 90s | idle |\n" +
		"| `--debug` | false | pprof |\n" +
		"| `--cert` | none (the manifests set one) | with `--key` |\n" +
		"| `--size` | 8Mi | bytes |\n" +
		"| `--gone` | none | removed |\n\nafter\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(readme), 0o600); err != nil {
		t.Fatal(err)
	}
	rows, err := Table(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	got := Diff(flags, rows)
	want := []string{
		`--size: the table says default "8Mi", the command "4Mi"`,
		"the table lists --gone, which the command does not register",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff:\n got %q\nwant %q", got, want)
	}
	flags["extra"] = Flag{Name: "extra", Type: "int", Default: "3"}
	if got := Diff(flags, rows, "gone"); !slices.Contains(got, `--extra (default "3") is missing from the table`) {
		t.Errorf("an unlisted flag not reported: %q", got)
	}
}
