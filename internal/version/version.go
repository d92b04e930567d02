// Package version carries the build's version, stamped by the Makefile.
package version

// Version is set with -ldflags "-X .../internal/version.Version=...".
var Version = "dev"
