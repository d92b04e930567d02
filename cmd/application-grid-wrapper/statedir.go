package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// prepareStateDir creates dir and gives it to owner ("UID:GID") with mode
// 0700: kubelet creates a DirectoryOrCreate hostPath root-owned 0755, which
// the wrapper (uid 65532) could not write. Run as root in an init container.
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
	// Mode first, while root still owns it: changing the mode of a
	// directory someone else owns needs CAP_FOWNER, which the init
	// container does not have (CAP_CHOWN only).
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	fmt.Printf("state directory %s: owner %d:%d, mode 0700\n", dir, uid, gid)
	return nil
}
