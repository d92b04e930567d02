#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, clientset, listers, informers and
# apply configurations (k8s.io/code-generator), and the CRD manifests
# (controller-gen). Generators are pinned in hack/tools/go.mod.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULE=github.com/servicegroup/servicegroup
BOILERPLATE="$REPO_ROOT/hack/boilerplate.go.txt"
TOOLS_MOD="$REPO_ROOT/hack/tools/go.mod"
# The generators compile from the module proxy on a fresh machine; at the
# Go collector's target of the other builds (hack/lib/k8s-module.sh).
export GOGC=${GOGC:-400}

# `go mod download -json` fetches the module when the module cache lacks it
# (a fresh machine) and prints where it is; `go list -m` would print nothing.
CODEGEN_PKG=$(cd "$REPO_ROOT/hack/tools" && go mod download -json k8s.io/code-generator |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -f "$CODEGEN_PKG/kube_codegen.sh" ]; then
	echo "update-codegen: k8s.io/code-generator not found in the module cache (got '$CODEGEN_PKG')" >&2
	exit 1
fi
# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"

cd "$REPO_ROOT"

kube::codegen::gen_helpers \
	--boilerplate "$BOILERPLATE" \
	"$REPO_ROOT/apis"

kube::codegen::gen_client \
	--with-watch \
	--with-applyconfig \
	--output-dir "$REPO_ROOT/client" \
	--output-pkg "$MODULE/client" \
	--boilerplate "$BOILERPLATE" \
	"$REPO_ROOT/apis"


# CRDs: full OpenAPI v3 schemas from the Go types. Embedded ObjectMeta in pod
# templates gets its labels/annotations schema, or the apiserver would prune them.
go tool -modfile="$TOOLS_MOD" controller-gen \
	crd:generateEmbeddedObjectMeta=true,allowDangerousTypes=false \
	paths="./apis/..." \
	output:crd:artifacts:config="$REPO_ROOT/build/crds"

# Embedded metadata also accepts creationTimestamp (null in most manifests
# kubectl or SuperEdge's docs produce); strict validation would reject it.
(cd "$REPO_ROOT/hack/tools" && go run ./crd-creationtimestamp "$REPO_ROOT"/build/crds/superedge.io_*.yaml)

# The workload templates' descriptions (apps/v1's own, which `kubectl explain
# deployment.spec` shows) out of the grid CRDs: four fifths of each CRD's
# bytes, paid on every apply, read and drift check. Schemas stay whole.
(cd "$REPO_ROOT/hack/tools" && go run ./crd-template-docs "$REPO_ROOT"/build/crds/superedge.io_*.yaml)

# The Helm chart's templates, Chart.yaml and crds/ from build/manifests and
# build/crds (internal/chartgen): one source for both install paths.
go run ./hack/chartgen -root "$REPO_ROOT"
