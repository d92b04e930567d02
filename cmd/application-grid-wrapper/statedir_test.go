package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// helperEnv makes the test binary act as the init container (see
// TestHelperStateDir) instead of running tests.
const helperEnv = "WRAPPER_STATEDIR_HELPER"

// TestChownStateDirWithCapChownOnly runs --chown-state-dir as the shipped
// init container does: root with CAP_CHOWN as its only capability (setpriv
// empties the bounding set), on a root-owned 0755 directory as the kubelet
// creates a hostPath, and again on the handed-over directory as after a pod
// restart.
func TestChownStateDirWithCapChownOnly(t *testing.T) {
	setpriv := initContainerTools(t, "setpriv")[0]
	chownAs := func(mode, dir string) ([]byte, error) {
		return asInitContainer(setpriv, nil, ",+chown", "TestHelperStateDir", helperEnv+"="+mode, "WRAPPER_STATEDIR="+dir)
	}

	// The sandbox is real: without CAP_FOWNER, root cannot chmod what it does not own.
	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if out, err := chownAs("chmod", other); err == nil {
		t.Fatalf("chmod of a directory owned by 65532 succeeded with CAP_CHOWN only:\n%s", out)
	}

	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"first start", "restart"} {
		if out, err := chownAs("prepare", dir); err != nil {
			t.Fatalf("%s: %v\n%s", run, err, out)
		}
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != 65532 || sys.Gid != 65532 || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: state dir %d:%d %v, want 65532:65532 0700", run, sys.Uid, sys.Gid, st.Mode().Perm())
		}
	}
}

// TestHelperStateDir is the init container's process for the test above.
func TestHelperStateDir(t *testing.T) {
	dir := os.Getenv("WRAPPER_STATEDIR")
	switch os.Getenv(helperEnv) {
	case "":
		t.Skip("run by TestChownStateDirWithCapChownOnly")
	case "chmod":
		if err := os.Chmod(dir, 0o700); err != nil {
			if errors.Is(err, os.ErrPermission) {
				t.Fatal(err)
			}
			t.Fatalf("unexpected error: %v", err)
		}
	case "prepare":
		if err := run(t.Context(), []string{"application-grid-wrapper", "--state-dir", dir, "--chown-state-dir", "65532:65532"}); err != nil {
			t.Fatal(err)
		}
	}
}
