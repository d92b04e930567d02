package gridhosts

// Ready implements the ready plugin's Readiness: true once every informer
// has synced.
func (g *GridHosts) Ready() bool { return g.synced.Load() }
