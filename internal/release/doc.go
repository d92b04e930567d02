// Package release makes a release of servicegroup (build/README-images.md,
// "Releases"; `make release`): the multi-arch images of internal/imagebuild
// pushed, an SBOM per image (CycloneDX JSON, from the binaries' Go build
// information and the base layer), a cosign signature per image and per
// SBOM attestation, the Helm chart packaged and pushed as an OCI artifact,
// and kubectl-grid archives per platform with their checksums and a krew
// manifest. The tools are the real helm and cosign (hack/release-tools.sh).
package release
