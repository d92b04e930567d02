// Package corefile holds the ready Corefiles of the custom CoreDNS; this
// test keeps the manifests' copies identical to them.
package corefile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestManifestsShipTheseCorefiles: each Corefile the manifests put in a
// ConfigMap is the same text as the ready Corefile here, byte for byte.
func TestManifestsShipTheseCorefiles(t *testing.T) {
	for ready, manifest := range map[string]string{
		"Corefile.node":    filepath.Join("..", "build", "manifests", "coredns-node", "Corefile"),
		"Corefile.clients": filepath.Join("..", "build", "manifests", "coredns-shared", "Corefile"),
	} {
		want, err := os.ReadFile(ready)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from corefile/%s: copy it (cp corefile/%s %s)", manifest, ready, ready, manifest)
		}
	}
}
