// Package watchcache is the wrapper's watch cache, named after
// kube-apiserver's: stores that hold the served form of every object of a
// resource and a log of recent events watchers read by cursor (store.go),
// on a clock of their own or mirroring a source's versions (clock.go,
// mirror.go), seeded from a snapshot (seed.go); the resource table and
// kube-proxy's selection (resources.go, selection.go); and View, the one
// handler that serves get, list and watch of a set of stores with the
// apiserver's semantics, behind one readiness state (view.go, handler.go,
// watch.go, watch_server.go, ready.go). The wrapper serves kube-proxy's
// view and the DNS view from it, and the site stream its peers' view.
package watchcache
