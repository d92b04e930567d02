package wrapper

import (
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// openStores builds the served stores on one clock, seeded from the
// snapshot when there is a usable one, with versions above any a previous
// process may have handed out.
func (s *Server) openStores() error {
	opts := s.opts
	snap := s.loadSnapshot()
	clock := watchcache.NewClock(s.startVersion(snap))
	stores := map[string]*watchcache.Store{}
	for _, r := range kubeProxyResources {
		st := r.NewStore(clock, watchcache.LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes})
		stores[r.Name] = st
		s.served = append(s.served, &watchcache.Served{Resource: r, Store: st})
	}
	s.dns = newDNSView(clock, watchcache.LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes})
	s.cidrs = newServiceCIDRs(clock, watchcache.LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes})
	if err := s.seed(snap, clock); err != nil {
		return err
	}
	s.stores = Stores{Services: stores[watchcache.ResourceServices], Endpoints: stores[watchcache.ResourceEndpoints], EndpointSlices: stores[watchcache.ResourceEndpointSlices], Nodes: stores[watchcache.ResourceNodes]}
	return nil
}

// startVersion is the first resourceVersion: above the clock, the
// snapshot's versions and the on-disk reservation, which it extends to
// cover the start (the start version itself is served: lists of an
// unchanged store).
func (s *Server) startVersion(snap *snapshot.Snapshot) (uint64, *watchcache.Reservation) {
	opts := s.opts
	start := opts.StartVersion
	if snap != nil {
		start = max(start, snap.MaxVersion()+1)
	}
	var reservation *watchcache.Reservation
	if opts.StateDir != "" {
		// Unreadable (only a damaged disk: it is written atomically): serve
		// on, with the clock and the snapshot as the only floor.
		reserved, err := watchcache.LoadReservation(opts.StateDir)
		if err != nil {
			klog.Background().Error(err, "Ignoring the resourceVersion reservation: versions may repeat if the clock was stepped back")
		}
		start = max(start, reserved+1)
		// The start version itself is served (lists of an unchanged
		// store): reserved before anything is.
		reservation = watchcache.NewReservation(opts.StateDir, start)
	}
	return start, reservation
}
