package release

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Cosign runs the real cosign (hack/release-tools.sh) with a key pair and
// no transparency log: signatures are checked against the published public
// key alone, offline (--insecure-ignore-tlog on verify says so).
type Cosign struct {
	Bin      string
	Key      string // the private key; its password in COSIGN_PASSWORD
	Insecure bool   // plain-HTTP registry
}

// GenerateKeyPair writes PREFIX.key (encrypted with COSIGN_PASSWORD) and
// PREFIX.pub, as an operator makes the release key once.
func GenerateKeyPair(ctx context.Context, bin, prefix string) error {
	_, err := runTool(ctx, bin, nil, "generate-key-pair", "--output-key-prefix", prefix)
	return err
}

// run runs cosign with args; COSIGN_PASSWORD is passed on (empty when
// unset, for a key without a password, so that cosign never prompts).
func (c Cosign) run(ctx context.Context, args ...string) (string, error) {
	return runTool(ctx, c.Bin, nil, args...)
}

func (c Cosign) registryFlags() []string {
	if c.Insecure {
		return []string{"--allow-insecure-registry", "--allow-http-registry"}
	}
	return nil
}

// PublicKey writes the key pair's public key to out.
func (c Cosign) PublicKey(ctx context.Context, out string) error {
	_, err := c.run(ctx, "public-key", "--key", c.Key, "--outfile", out)
	return err
}

// Sign signs ref (REGISTRY/NAME@DIGEST) in its registry.
func (c Cosign) Sign(ctx context.Context, ref string) error {
	args := append([]string{"sign", "--key", c.Key, "--tlog-upload=false", "--yes"}, c.registryFlags()...)
	_, err := c.run(ctx, append(args, ref)...)
	return err
}

// Attest signs the SBOM as an in-toto attestation of ref (predicate type
// CycloneDX), stored beside the image.
func (c Cosign) Attest(ctx context.Context, ref, sbom string) error {
	args := append([]string{"attest", "--key", c.Key, "--type", "cyclonedx", "--predicate", sbom, "--tlog-upload=false", "--yes"}, c.registryFlags()...)
	_, err := c.run(ctx, append(args, ref)...)
	return err
}

// Verify checks ref's signature against the public key pub, offline.
func (c Cosign) Verify(ctx context.Context, pub, ref string) error {
	args := append([]string{"verify", "--key", pub, "--insecure-ignore-tlog=true"}, c.registryFlags()...)
	_, err := c.run(ctx, append(args, ref)...)
	return err
}

// Save writes ref with its signatures and attestations as an OCI layout.
func (c Cosign) Save(ctx context.Context, ref, dir string) error {
	args := append([]string{"save", "--dir", dir}, c.registryFlags()...)
	_, err := c.run(ctx, append(args, ref)...)
	return err
}

// runTool runs bin and returns its standard output; its error carries the
// tool's standard error. HOME-like state goes to a temporary directory
// (cosign's sigstore cache, helm's registry config) so that a release
// reads no operator's configuration but the Docker credentials.
func runTool(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	state, err := os.MkdirTemp("", "release-tool-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(state)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"COSIGN_PASSWORD="+os.Getenv("COSIGN_PASSWORD"),
		"TUF_ROOT="+filepath.Join(state, "sigstore"),
		"HELM_CACHE_HOME="+filepath.Join(state, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(state, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(state, "helm-data"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+"\n"+stdout.String()))
	}
	return stdout.String() + stderr.String(), nil
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
