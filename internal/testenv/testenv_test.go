package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A missing requirement fails under CI and skips elsewhere: run in a child
// both ways.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") != "" {
		Missing(t, "needs the moon")
		return
	}
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		switch {
		case ci == "" && (err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "needs the moon")):
			t.Errorf("outside CI: want a skip naming what is missing, got %v:\n%s", err, out)
		case ci != "" && (err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "required under CI: needs the moon")):
			t.Errorf("under CI: want a failure naming what is missing, got %v:\n%s", err, out)
		}
	}
}
