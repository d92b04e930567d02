package wrapper

import (
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
)

// openStores builds the served stores on one clock, seeded from the
// snapshot when there is a usable one, with versions above any a previous
// process may have handed out.
func (s *Server) openStores() error {
	opts := s.opts
	snap := s.loadSnapshot()
	start, reservation := s.startVersion(snap)
	clock := NewClock(start)
	clock.reserve = reservation
	stores := map[string]*Store{}
	for _, r := range servedResources {
		st := NewStore(r.name, clock, r.newEmpty, r.fields, LogLimits{Bytes: opts.EventLogBytes, MaxLagBytes: opts.WatchMaxLagBytes})
		stores[r.name] = st
		s.resources[r.gv.WithResource(r.name)] = &servedResource{resource: r, store: st}
	}
	s.openDNSStores(clock)
	if err := s.seed(snap, clock); err != nil {
		return err
	}
	s.stores = Stores{Services: stores[ResourceServices], Endpoints: stores[ResourceEndpoints], EndpointSlices: stores[ResourceEndpointSlices], Nodes: stores[ResourceNodes]}
	return nil
}

// startVersion is the first resourceVersion: above the clock, the
// snapshot's versions and the on-disk reservation, which it extends to
// cover the start (the start version itself is served: lists of an
// unchanged store).
func (s *Server) startVersion(snap *snapshot.Snapshot) (uint64, *rvReservation) {
	opts := s.opts
	start := opts.StartVersion
	if snap != nil {
		start = max(start, snap.MaxVersion()+1)
	}
	var reservation *rvReservation
	if opts.StateDir != "" {
		// Unreadable (only a damaged disk: it is written atomically): serve
		// on, with the clock and the snapshot as the only floor.
		reserved, err := loadRVReservation(opts.StateDir)
		if err != nil {
			klog.Background().Error(err, "Ignoring the resourceVersion reservation: versions may repeat if the clock was stepped back")
		}
		start = max(start, reserved+1)
		// The start version itself is served (lists of an unchanged store):
		// reserve it before anything is.
		reservation = &rvReservation{dir: opts.StateDir}
		reservation.cover(start)
	}
	return start, reservation
}
