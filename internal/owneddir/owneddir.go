// Package owneddir makes temporary directories that name the process owning
// them, so that a later run removes those a killed test left behind.
package owneddir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownerFile names the process that made a temporary directory.
const ownerFile = ".servicegroup-owner"

// Make makes a temporary directory marked with this process's PID,
// after removing the directories of the same prefix whose process is gone. A
// test killed by its timeout runs no cleanup, and on a shared disk such
// leftovers add up until the real-node kubelets see disk pressure and evict.
func Make(prefix string) (string, error) {
	Sweep(prefix)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("mark %s as this process's: %w", dir, err)
	}
	return dir, nil
}

// Use returns dir, made if missing, or, when dir is "", a directory from
// Make; owned is true for the latter, which the caller removes when done.
func Use(dir, prefix string) (path string, owned bool, err error) {
	if dir == "" {
		path, err = Make(prefix)
		return path, err == nil, err
	}
	return dir, false, os.MkdirAll(dir, 0o755)
}

// Sweep removes the temporary directories of prefix whose owner has
// exited. Directories without an owner mark (being made right now, or made by
// something else) are left alone.
func Sweep(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			_ = os.RemoveAll(dir)
		}
	}
}
