// Package crds embeds the generated CustomResourceDefinition manifests so the
// controller can install and reconcile them at start-up.
package crds

import "embed"

// FS holds one YAML manifest per CRD, as written by controller-gen.
//
//go:embed superedge.io_*.yaml
var FS embed.FS
