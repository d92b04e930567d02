package gridhosts

// Ready implements the ready plugin's Readiness: true once every informer
// has synced, and also while names are answered from a snapshot (the
// apiserver away at start-up): an edge node's DNS must come up during an
// outage. How old that snapshot is shows in the snapshot_age_seconds metric
// and the log; the ready plugin has no room for detail.
func (g *GridHosts) Ready() bool { return g.synced.Load() || g.snap.Load() != nil }
