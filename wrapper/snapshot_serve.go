package wrapper

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// loadSnapshot sets up the persister and reads the snapshot (nil when there
// is none, or it is unusable: logged).
func (s *Server) loadSnapshot() *snapshot.Snapshot {
	if s.opts.StateDir == "" {
		return nil
	}
	s.persist = newPersister(s.opts.StateDir, s.opts.NodeName, s.opts.Upstream.Host, s.opts.SnapshotMaxAge)
	s.persist.Stamp.Probe = func(ctx context.Context) error {
		_, err := s.client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
		return err
	}
	return s.persist.Load(klog.Background())
}

// seed fills the stores from snap and gives the persister the stores.
func (s *Server) seed(snap *snapshot.Snapshot, clock *watchcache.Clock) error {
	if s.persist == nil {
		return nil
	}
	s.persist.Clock = clock
	for _, r := range slices.Concat(s.served, s.dns.own, []*watchcache.Served{s.cidrs.served}) { // snapshotResources' order
		s.persist.keep(r)
	}
	if snap == nil {
		return nil
	}
	for _, r := range s.persist.resources {
		objs, ok := snap.Objects[r.Name]
		if !ok { // the DNS view's or ServiceCIDRs, from an older wrapper
			continue
		}
		sec := snap.Section(r.Name)
		if err := r.Store.Seed(objs, sec.From, sec.At); err != nil {
			return fmt.Errorf("seeding %s from the snapshot: %w", r.Name, err)
		}
	}
	// Nothing is written until upstream confirms: a rewrite would pass the
	// snapshot's state off as newer than it is.
	s.persist.MarkWritten(clock.Current())
	_, s.dns.seeded = snap.Objects[watchcache.ResourceNamespaces]
	_, s.cidrs.seeded = snap.Objects[watchcache.ResourceServiceCIDRs]
	s.seededFrom.Store(snap)
	return nil
}

// serveSnapshot makes a seeded wrapper ready at once: kube-proxy syncs from
// the snapshot while the informers try upstream (client-go's reflectors
// retry with backoff).
func (s *Server) serveSnapshot(logger klog.Logger) {
	snap := s.seededFrom.Load()
	if snap == nil || !s.ready.ServeSnapshot() {
		return
	}
	servingSnapshotSince.Serving(snap.Header.WrittenAt)
	logger.Info("Serving the snapshot until upstream answers", "path", s.persist.Path(),
		"writtenAt", snap.Header.WrittenAt, "age", time.Since(snap.Header.WrittenAt).Round(time.Second),
		"services", len(snap.Objects[watchcache.ResourceServices]), "endpointSlices", len(snap.Objects[watchcache.ResourceEndpointSlices]),
		"endpoints", len(snap.Objects[watchcache.ResourceEndpoints]), "nodes", len(snap.Objects[watchcache.ResourceNodes]))
}

// confirmSnapshot runs once the informers have synced and every Service was
// re-filtered (the stores emitted only real differences): objects of the
// snapshot upstream no longer has are deleted.
func (s *Server) confirmSnapshot(logger klog.Logger) {
	snap := s.seededFrom.Load()
	if snap == nil {
		return
	}
	dropped := 0
	for _, r := range s.persist.resources {
		dropped += r.Store.DropSeeded()
	}
	s.seededFrom.Store(nil)
	servingSnapshotSince.Live()
	logger.Info("Upstream synced: the snapshot's state is replaced by upstream's", "writtenAt", snap.Header.WrittenAt,
		"droppedObjects", dropped)
}

// stopServingSnapshot clears the staleness when Run ends before upstream
// confirmed the snapshot.
func (s *Server) stopServingSnapshot() {
	if s.seededFrom.Load() != nil {
		servingSnapshotSince.Live()
	}
}

// snapshotDetail is what /readyz adds to "ok" about the snapshot.
func (s *Server) snapshotDetail() string {
	out := ""
	if snap := s.seededFrom.Load(); snap != nil {
		out = fmt.Sprintf(": serving the snapshot written at %s (%s ago); upstream not synced yet, retrying",
			snap.Header.WrittenAt.Format(time.RFC3339), time.Since(snap.Header.WrittenAt).Round(time.Second))
	}
	if e, _ := s.upstreamRefusal.Load().(string); e != "" {
		out += "; upstream refused the wrapper at its last refusal: " + e
	}
	if s.persist != nil {
		if e := s.persist.LastError(); e != "" {
			out += "; snapshot not written (serving from memory only): " + e
		}
	}
	return out
}
