//go:build !linux

package probe

import "errors"

func dupSocket(int) (int, error) { return -1, errors.New("not on this system") }

func socketState(int) string { return "" }
