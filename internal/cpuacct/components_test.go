package cpuacct

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A real process's record: its program, package and CPU time as the kernel
// counted them, read back; without ComponentsEnv nothing is written.
func TestRecordComponent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "components.jsonl")
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ComponentsEnv, "")
	if err := RecordComponent("busy", cmd.Path, cmd.ProcessState, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a record without %s: %v", ComponentsEnv, err)
	}
	t.Setenv(ComponentsEnv, path)
	t.Setenv(PackageEnv, "example.com/p")
	for range 2 {
		if err := RecordComponent("busy", cmd.Path, cmd.ProcessState, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := ReadComponents(path)
	if err != nil {
		t.Fatal(err)
	}
	want := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if len(cs) != 2 || cs[0].Program != "sh" || cs[0].Package != "example.com/p" || cs[0].Name != "busy" ||
		want <= 0 || (cs[0].CPU()-want).Abs() > time.Millisecond {
		t.Fatalf("records %+v, want 2 of sh in example.com/p with %s of CPU", cs, want)
	}
}

func TestSummarizeComponents(t *testing.T) {
	cs := []Component{
		{Package: "a", Name: "cp-1", Program: "kube-apiserver", User: 10, System: 2, Wall: 60},
		{Package: "a", Name: "cp-2", Program: "kube-apiserver", User: 8, System: 2, Wall: 30},
		{Package: "b", Name: "cp", Program: "kube-apiserver", User: 30, Wall: 100},
		{Package: "a", Name: "etcd", Program: "etcd", User: 1, System: 1, Wall: 60},
	}
	got := SummarizeComponents(cs, func(c Component) string { return c.Program })
	if len(got) != 2 || got[0].Key != "kube-apiserver" || got[0].Started != 3 || got[0].CPU != 52*time.Second ||
		got[0].Wall != 190*time.Second || got[1].Key != "etcd" || got[1].CPU != 2*time.Second {
		t.Fatalf("by program: %+v", got)
	}
	var out bytes.Buffer
	if err := WriteComponents(&out, cs, 1); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"tests started and stopped: 4, 0.9 CPU-minutes", "3      0.87        17.3  kube-apiserver", "1      0.50        30.0  b: kube-apiserver"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("no %q in:\n%s", line, out.String())
		}
	}
	if strings.Contains(out.String(), "etcd") {
		t.Errorf("more than the top 1 of each table:\n%s", out.String())
	}
}

func TestReadComponentsRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "components.jsonl")
	if cs, err := ReadComponents(path); err != nil || cs != nil {
		t.Fatalf("a missing file: %v, %v", cs, err)
	}
	for _, bad := range []string{`{"package":"a"}`, `{"program":`} {
		if err := os.WriteFile(path, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadComponents(path); err == nil || !strings.Contains(err.Error(), ":1:") {
			t.Errorf("%s: %v, want an error naming line 1", bad, err)
		}
	}
}
