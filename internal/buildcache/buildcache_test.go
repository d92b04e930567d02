package buildcache

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

func TestRoot(t *testing.T) {
	t.Setenv("SERVICEGROUP_CACHE", "/x/sg")
	if got := Root(); got != "/x/sg" {
		t.Errorf("Root with SERVICEGROUP_CACHE = %q", got)
	}
	t.Setenv("SERVICEGROUP_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	if got := Root(); got != "/x/cache/servicegroup" {
		t.Errorf("Root with XDG_CACHE_HOME = %q", got)
	}
}

// TestUnderWay holds a lock the way the scripts do (flock(1) on a file in
// the cache) and sees it held, then released.
func TestUnderWay(t *testing.T) {
	testenv.Tools(t, "flock")
	t.Setenv("SERVICEGROUP_CACHE", t.TempDir())
	if UnderWay("x.lock") {
		t.Fatal("a lock file that does not exist is held")
	}
	lock := filepath.Join(Root(), "x.lock")
	holder := exec.Command("flock", lock, "sh", "-c", "echo locked; read _; exit 0")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "locked") {
		t.Fatalf("flock said %q, %v", buf[:n], err)
	}
	if !UnderWay("x.lock") {
		t.Error("a held lock is not seen held")
	}
	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for UnderWay("x.lock") {
		if time.Now().After(deadline) {
			t.Fatal("a released lock is still seen held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal(err)
	}
}
