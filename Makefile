# servicegroup: application-grid-controller, application-grid-wrapper and a
# CoreDNS build with the gridhosts plugin.

GO         ?= go
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN        ?= bin
LDFLAGS    := -s -w -X github.com/servicegroup/servicegroup/internal/version.Version=$(VERSION)
# The Go collector's target of the compiler and linker (the runtime's is 100):
# 15% less CPU to build from an empty cache, as in hack/lib/k8s-module.sh.
BUILD_GOGC ?= 400
GOBUILD    := CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags '$(LDFLAGS)'
# -ldflags=-w: test binaries without DWARF (no debugger reads them; tracebacks and race
# reports use the runtime's own tables) link in about 0.6x the CPU (hack/test.sh says more).
TEST_FLAGS ?= -race -trimpath -count=1 -timeout 60m -ldflags=-w
export KUBE_BIN_DIR ?= $(shell hack/k8s-bins.sh --print-dir)

.PHONY: all build controller wrapper coredns kubectl-grid generate verify lint test unit integration \
	e2e demo bench bench-check bench-fleet bench-storm bench-nodelabels bench-perclient fuzz host-deps k8s-bins older-release-bins kube-proxy-bins apiserver-bins monitoring-tools release-tools superedge-bins images release clean

all: build

## build: the three binaries and the kubectl grid plugin into ./bin
build: controller wrapper coredns kubectl-grid

controller:
	$(GOBUILD) -o $(BIN)/application-grid-controller ./cmd/application-grid-controller

wrapper:
	$(GOBUILD) -o $(BIN)/application-grid-wrapper ./cmd/application-grid-wrapper

coredns:
	$(GOBUILD) -o $(BIN)/coredns ./cmd/coredns

kubectl-grid:
	$(GOBUILD) -o $(BIN)/kubectl-grid ./cmd/kubectl-grid

## generate: deepcopy, clientset, listers, informers, apply configurations, CRDs, the Helm chart (build/chart)
generate:
	hack/update-codegen.sh

## verify: generated files are current, code is formatted and vetted
verify: lint
	hack/verify-codegen.sh

## lint: gofmt, no merge conflict markers, go vet, and every package built without its tests (with -race -trimpath: the build settings of `make test`, so the
## dependencies compile once for both: -trimpath is part of every package's build cache key)
lint:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if git grep -nE '^(<{7}|>{7})( |$$)' -- . ':!*.go'; then echo "merge conflict markers left in the files above"; exit 1; fi
	GOGC=$(BUILD_GOGC) $(GO) vet -race -trimpath ./...
	GOGC=$(BUILD_GOGC) $(GO) build -race -trimpath ./...

## host-deps: install the Debian packages in hack/host-packages.txt (root), or name the missing ones
host-deps:
	@hack/host-deps.sh

## k8s-bins: build (or reuse the cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubectl
k8s-bins:
	hack/k8s-bins.sh

## older-release-bins: build (or reuse the cached) older kube-apiserver and kube-proxy releases of
## hack/apiserver-versions.txt and hack/kube-proxy-versions.txt, one go build per release for both
older-release-bins:
	hack/older-release-bins.sh

## kube-proxy-bins: build (or reuse the cached) older kube-proxy releases in hack/kube-proxy-versions.txt,
## which the end-to-end version matrix runs beside k8s-bins' own
kube-proxy-bins:
	hack/kube-proxy-bins.sh

## apiserver-bins: build (or reuse the cached) older kube-apiserver releases in hack/apiserver-versions.txt,
## which the controller's and the wrapper's older-apiserver tests run against
apiserver-bins:
	hack/apiserver-bins.sh

## monitoring-tools: build (or reuse the cached) promtool and take prometheus-operator's CRDs, for the alert
## and monitoring-component tests, then the Prometheus server, prometheus-operator and its config reloader,
## for the real-node test; all from the Go module proxy (hack/monitoring-versions.env)
monitoring-tools:
	hack/monitoring-tools.sh

## release-tools: build (or reuse the cached) helm, cosign and krew from the Go module proxy
## (hack/release-versions.env), for the chart's tests, make release and the real-node test; .ci/run
## starts it early and, under CI, a test that needs a tool waits for its build (internal/releasetools)
release-tools:
	hack/release-tools.sh

## superedge-bins: build (or reuse the cached) SuperEdge's own application-grid-controller,
## application-grid-wrapper and statefulset-grid-daemon from the Go module proxy
## (hack/superedge-versions.env), for the real-node test's SuperEdge phase; .ci/run starts it early
superedge-bins:
	hack/superedge-bins.sh

## test: unit, integration (real apiserver) and end-to-end tests, with -race (test/realnode, internal/release and
## internal/imagebuild without: they run real builds and compression, in a go test of their own beside the rest), never from the test cache
## (the real binaries they run are outside what go test tracks). The tests run the binaries `make build`
## made (SERVICEGROUP_BIN), so each is compiled once per run; hack/test.sh builds the older releases and
## the monitoring tools while the tests run (those that need them wait), and prints the slowest packages
## and tests and the CPU-minutes of the run.
test: host-deps k8s-bins build
	SERVICEGROUP_BIN=$(abspath $(BIN)) TEST_FLAGS='$(TEST_FLAGS)' hack/test.sh

## bench: benchmarks against the real binaries, each reporting against its
## baseline from the same run (-v prints the ratio lines). Heavy ones take one
## iteration under the default benchtime.
bench: host-deps k8s-bins
	@hack/host-deps.sh hack/bench-packages.txt
	$(GO) test -run '^$$' -bench . -v -timeout 120m ./...

## bench-check: every benchmark with a goal (docs/benchmarks/goals.md) at the size given there, each
## beside its baseline in one run, the runs of goals.md's group counts together and the timing ones alone (15m50s on the 2-core machine
## at load 10-35, about 12m20s quiet, 15 the bound; it prints its wall and CPU time); prints the table of goals met and
## fails naming each goal missed or not measured (hack/benchcheck). Not in .ci/run: timing on shared
## machines. BENCH_CHECK_FLAGS: e.g. -runs fleet,latency or -record FILE (the result as markdown)
BENCH_CHECK_FLAGS ?=
## The binaries run from copies: how much of a just-built binary counts as resident differs from a copy
## (docs/benchmarks/gridhosts-memory.md), and the memory goals are measured on copies.
bench-check: host-deps k8s-bins build
	@hack/host-deps.sh hack/bench-packages.txt
	rm -rf $(BIN)/bench-check && mkdir -p $(BIN)/bench-check && \
		cp $(BIN)/application-grid-controller $(BIN)/application-grid-wrapper $(BIN)/coredns $(BIN)/kubectl-grid $(BIN)/bench-check/
	CI=true SERVICEGROUP_BIN=$(abspath $(BIN))/bench-check $(GO) run ./hack/benchcheck $(BENCH_CHECK_FLAGS)

## bench-fleet: the fleet benchmark alone (docs/benchmarks/wrapper-fleet.md);
## SG_FLEET_NODES and SG_FLEET_WRAPPERS size it
bench-fleet: k8s-bins
	CI=true $(GO) test -run '^$$' -bench '^BenchmarkFleet$$' -benchtime=1x -v -timeout 40m ./wrapper/

## bench-storm: the reconnect storm alone (docs/benchmarks/wrapper-reconnect-storm.md);
## SG_STORM_WRAPPERS, SG_STORM_NODES and SG_STORM_OUTAGE (seconds) size it
bench-storm: k8s-bins
	CI=true $(GO) test -run '^$$' -bench '^BenchmarkReconnectStorm$$' -benchtime=1x -v -timeout 40m ./wrapper/

## bench-nodelabels: NodeLabelSummaries at 10,000 Nodes alone (docs/benchmarks/fleet-scale.md,
## item 2; about 2 minutes); SG_NL_NODES, SG_NL_UNITS, SG_NL_WRAPPERS and SG_NL_REPORTS size it
bench-nodelabels: k8s-bins
	CI=true $(GO) test -run '^$$' -bench '^BenchmarkNodeLabelsAtScale$$' -benchtime=1x -v -timeout 20m ./wrapper/

## bench-perclient: the apiserver's cost per edge node alone (docs/benchmarks/fleet-scale.md,
## item 3; about 9 minutes at 200 clients a group); SG_PERCLIENT_N, SG_PERCLIENT_SITE,
## SG_PERCLIENT_GROUPS (which groups, in which order), SG_PERCLIENT_CPU_RUNS and SG_PERCLIENT_PROFILES
## size and shape it
bench-perclient: k8s-bins
	CI=true $(GO) test -run '^$$' -bench '^BenchmarkAPIServerPerClient$$' -benchtime=1x -v -timeout 40m ./wrapper/

## fuzz: each fuzz target for FUZZTIME
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo ">> $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## e2e: the end-to-end tests alone (root: network namespaces, real kube-proxy)
e2e: host-deps k8s-bins kube-proxy-bins build
	SERVICEGROUP_BIN=$(abspath $(BIN)) $(GO) test -race -count=1 -timeout 30m -v ./test/e2e/...

## demo: SuperEdge's demo on a real cluster on this machine, up until Ctrl-C (root)
demo: host-deps k8s-bins
	@echo ">> compiling the demo (the first time this takes a few minutes)"
	$(GO) build -o $(BIN)/demo ./test/e2e/demo
	@echo ">> running the demo"
	$(BIN)/demo $(DEMO_FLAGS)

## images: the three images as multi-arch OCI layouts in $(BIN)/images, no Docker
## engine needed (build/README-images.md); REGISTRY=host/prefix also pushes them.
## Writes $(BIN)/images/kustomization.yaml: build/manifests/default running these
## images (pushed: by digest); install with kubectl apply --server-side -k $(BIN)/images
REGISTRY          ?=
PLATFORMS         ?= linux/amd64,linux/arm64,linux/arm/v7
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
images:
	$(GO) run ./cmd/image-build --out $(BIN)/images --version $(VERSION) \
		--revision "$(shell git rev-parse HEAD 2>/dev/null)" --source-date-epoch $(SOURCE_DATE_EPOCH) \
		--platforms $(PLATFORMS) $(if $(REGISTRY),--registry $(REGISTRY))

## release: VERSION=vX.Y.Z (build/VERSION's) into $(BIN)/release (build/README-images.md, "Releases"):
## the images as `make images` builds them, pushed to REGISTRY (empty: a registry of the run's own on
## 127.0.0.1, the signed images kept as OCI layouts), an SBOM per image (CycloneDX), a cosign signature
## per image and per SBOM attestation (COSIGN_KEY, COSIGN_PASSWORD; no transparency log), the Helm chart
## as an OCI artifact, signed, kubectl-grid archives with SHA256SUMS and the krew manifest grid.yaml
## (PLUGIN_PLATFORMS: fewer than linux/amd64,arm64,arm, darwin/amd64,arm64, windows/amd64)
COSIGN_KEY ?=
release: release-tools
	$(GO) run ./cmd/release --version $(VERSION) --out $(BIN)/release \
		--revision "$(shell git rev-parse HEAD 2>/dev/null)" --source-date-epoch $(SOURCE_DATE_EPOCH) \
		--platforms $(PLATFORMS) --key "$(COSIGN_KEY)" $(if $(REGISTRY),--registry $(REGISTRY)) \
		$(if $(INSECURE_REGISTRY),--insecure-registry) $(if $(PLUGIN_PLATFORMS),--plugin-platforms $(PLUGIN_PLATFORMS))

clean:
	rm -rf $(BIN)
