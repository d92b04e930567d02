// Package imagebuild builds the project's container images without a
// container engine: static Go binaries cross-compiled by `go build`, put on a
// minimal base this package produces itself (passwd/group for the nonroot
// user, /tmp), assembled with go-containerregistry into one multi-arch OCI
// index per image, written as an OCI layout and optionally pushed.
//
// Builds are reproducible: every timestamp (tar entries, config "created",
// history) comes from one source date, tar entries are sorted, and binaries
// are linked with -trimpath and an empty build ID, so the same source yields
// the same digests.
package imagebuild
