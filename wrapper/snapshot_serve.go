package wrapper

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// loadSnapshot sets up the persister and reads the snapshot (nil when there
// is none, or it is unusable: logged).
func (s *Server) loadSnapshot() *snapshot {
	if s.opts.StateDir == "" {
		return nil
	}
	s.persist = &persister{dir: s.opts.StateDir, node: s.opts.NodeName, upstream: s.opts.Upstream.Host,
		maxAge: s.opts.SnapshotMaxAge, codec: newSnapshotCodec()}
	s.persist.stamp.Probe = func(ctx context.Context) error {
		_, err := s.client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
		return err
	}
	return s.persist.load(klog.Background())
}

// maxVersion is the newest resourceVersion the snapshot's writer had handed
// out when it wrote it; this process's versions start above it.
func (sn *snapshot) maxVersion() uint64 {
	var v uint64
	for _, sec := range sn.header.Sections {
		v = max(v, sec.At)
	}
	return v
}

// seed fills the stores from snap and gives the persister the stores.
func (s *Server) seed(snap *snapshot, clock *Clock) error {
	if s.persist == nil {
		return nil
	}
	s.persist.clock = clock
	for _, r := range servedResources {
		s.persist.resources = append(s.persist.resources, s.resources[r.gv.WithResource(r.name)])
	}
	s.persist.resources = append(s.persist.resources, s.dnsSnapshotStores()...)
	if snap == nil {
		return nil
	}
	for _, r := range s.persist.resources {
		objs, ok := snap.objects[r.name]
		if !ok { // the DNS view's, from an older wrapper
			continue
		}
		sec := snap.section(r.name)
		if err := r.store.Seed(objs, sec.From, sec.At); err != nil {
			return fmt.Errorf("seeding %s from the snapshot: %w", r.name, err)
		}
	}
	// Nothing is written until upstream confirms: a rewrite would pass the
	// snapshot's state off as newer than it is.
	s.persist.written = clock.Current()
	_, s.dns.seeded = snap.objects[ResourceNamespaces]
	s.seededFrom.Store(snap)
	return nil
}

// serveSnapshot makes a seeded wrapper ready at once: kube-proxy syncs from
// the snapshot while the informers try upstream (client-go's reflectors
// retry with backoff).
func (s *Server) serveSnapshot(logger klog.Logger) {
	snap := s.seededFrom.Load()
	if snap == nil || s.snapshotRefused.Load() {
		return
	}
	servingSnapshotSince.Serving(snap.header.WrittenAt)
	s.ready.Store(true)
	logger.Info("Serving the snapshot until upstream answers", "path", s.persist.path(),
		"writtenAt", snap.header.WrittenAt, "age", time.Since(snap.header.WrittenAt).Round(time.Second),
		"services", len(snap.objects[ResourceServices]), "endpointSlices", len(snap.objects[ResourceEndpointSlices]),
		"endpoints", len(snap.objects[ResourceEndpoints]), "nodes", len(snap.objects[ResourceNodes]))
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
		dropped += r.store.DropSeeded()
	}
	s.seededFrom.Store(nil)
	servingSnapshotSince.Live()
	logger.Info("Upstream synced: the snapshot's state is replaced by upstream's", "writtenAt", snap.header.WrittenAt,
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
			snap.header.WrittenAt.Format(time.RFC3339), time.Since(snap.header.WrittenAt).Round(time.Second))
	}
	if e, _ := s.upstreamRefusal.Load().(string); e != "" {
		out += "; upstream refused the wrapper at its last refusal: " + e
	}
	if s.persist != nil {
		if e, _ := s.persist.lastError.Load().(string); e != "" {
			out += "; snapshot not written (serving from memory only): " + e
		}
	}
	return out
}
