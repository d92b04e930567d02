# shellcheck shell=bash
# Sourced by hack/release-tools.sh and hack/monitoring-tools.sh, after
# hack/lib/k8s-module.sh.
#
# helm, cosign, promtool and the Prometheus server build in one throwaway
# module that starts from this project's go.mod: Go's build cache shares a
# compiled package only when its module version, and every dependency's,
# are the same, and each tool's own go.mod brings its own k8s.io release,
# x/net, grpc and otel. Built each in a module of its own from an empty
# cache, the four compiled about twice the source they compile here, where
# they also share what `make build` has compiled
# (docs/benchmarks/ci-runs.md). prometheus-operator (it requires an older
# Prometheus module and controller-runtime at its own k8s.io release) and
# krew (client-go v11) build in modules of their own.

tools_hack_dir=$project_root/hack

# tools_module DIR makes DIR that module: the project's go.mod and go.sum,
# with the shared tools and k8s.io/kubectl (which helm brings, at the
# project's k8s.io release) added. Warns, naming them, when a tool raises a
# module the project compiles: its go.mod should take that version, or the
# tools compile that module, and all that imports it, a second time.
tools_module() {
	local dir=$1 root k8s raised
	root=$project_root
	mkdir -p "$dir"
	sed 's#^module .*#module servicegroup.local/tools#' "$root/go.mod" >"$dir/go.mod"
	cp "$root/go.sum" "$dir/go.sum"
	k8s=$(sed -n 's#^[[:space:]]*k8s.io/client-go \(v[^ ]*\).*#\1#p' "$root/go.mod")
	(
		cd "$dir" || exit
		go get "helm.sh/helm/v3/cmd/helm@$(pin release HELM)" \
			"github.com/sigstore/cosign/v2/cmd/cosign@$(pin release COSIGN)" \
			"github.com/prometheus/prometheus@$(pin monitoring PROMETHEUS)" \
			"k8s.io/kubectl@$k8s" >&2
	) || return
	raised=$(join <(project_module_versions) <(requires "$dir/go.mod") | awk '$2 != $3 { print $1 " " $2 " => " $3 }')
	if [ -n "$raised" ]; then
		echo "warning: the tools raise modules this project compiles, so they compile them (and all that imports them) a second time; go get these versions in the project:" >&2
		echo "$raised" >&2
	fi
}

# tools_build_lock: one go build in a tools module at a time, so that two
# scripts do not compile the packages they share side by side. Taken last
# (after the script's own lock) and held until the script exits.
tools_build_lock() {
	exec 7>"$(cache_root)/tools-module.lock"
	flock 7
}

# requires GOMOD prints each module GOMOD requires and its version, sorted.
requires() {
	go mod edit -print "$1" |
		awk '/^require \(/ { r = 1; next } r && /^\)/ { r = 0 } r { print $1, $2 } /^require [^(]/ { print $2, $3 }' |
		sort
}

# pin STEM KEY prints KEY's version in hack/STEM-versions.env.
pin() {
	sed -n "s/^$2=//p" "$tools_hack_dir/$1-versions.env"
}
