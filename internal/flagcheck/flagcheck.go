// Package flagcheck holds the checks of flag values that more than one
// package makes, each returning a field.Error that names the flag, so a
// command's Validate reports every bad flag at once and before it starts
// anything.
package flagcheck

import (
	"net"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Off reports whether a bind address turns its server off: "" or "0".
func Off(addr string) bool { return addr == "" || addr == "0" }

// BindAddress checks a listen address host:port (an empty host listens on
// every address); "" and "0" turn the server off and are valid.
func BindAddress(flag *field.Path, addr string) *field.Error {
	if Off(addr) {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.Invalid(flag, addr, `must be host:port, or "0" to turn it off`)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return field.Invalid(flag, addr, "port must be a number from 0 to 65535")
	}
	return nil
}
