package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// prepareStateDir creates dir and gives it to owner ("UID:GID") with mode
// 0700: kubelet creates a DirectoryOrCreate hostPath root-owned 0755, which
// the wrapper (uid 65532) could not write. Run as root in an init container
// whose only capability is CAP_CHOWN: chmod needs the caller to own the
// directory (root has no CAP_FOWNER there), so the mode is set while root
// owns it, and a directory already handed over (a restarted pod) is taken
// back first.
func prepareStateDir(dir, owner string) error {
	if dir == "" {
		return errors.New("--chown-state-dir needs --state-dir")
	}
	u, g, ok := strings.Cut(owner, ":")
	uid, errU := strconv.Atoi(u)
	gid, errG := strconv.Atoi(g)
	if !ok || errU != nil || errG != nil || uid < 0 || gid < 0 {
		return fmt.Errorf("--chown-state-dir %q: want UID:GID, numeric", owner)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		if err := os.Chown(dir, os.Geteuid(), os.Getegid()); err != nil {
			return err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	fmt.Printf("state directory %s: owner %d:%d, mode 0700\n", dir, uid, gid)
	return nil
}
