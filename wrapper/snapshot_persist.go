package wrapper

import (
	"time"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/wrapper/snapshot"
	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

var (
	snapshotWrites       = metric.NewCounterVec(snapshottrust.WritesCounterOpts(metricsNamespace, ""), []string{"result"})
	snapshotBytes        = metric.Gauge("snapshot_bytes", "Size of the last snapshot written.")
	snapshotWriteSeconds = metric.Gauge("snapshot_write_duration_seconds",
		"Time the last snapshot write took (collect, encode, fsync, rename).")
	// servingSnapshotSince is the writtenAt of the snapshot being served
	// while upstream has not confirmed it.
	servingSnapshotSince snapshottrust.Age
	snapshotAge          = metric.NewGaugeFunc(snapshottrust.AgeGaugeOpts(metricsNamespace, ""), servingSnapshotSince.Seconds)
)

// persister is package snapshot's Persister (the file format and its
// writes) with the stores it keeps, which seeding and confirming a snapshot
// go through.
type persister struct {
	*snapshot.Persister
	resources []*watchcache.Served // in Persister.Sources' order
}

func newPersister(dir, node, upstream string, maxAge time.Duration) *persister {
	return &persister{Persister: &snapshot.Persister{Dir: dir, Node: node, Upstream: upstream, MaxAge: maxAge,
		Codec: newSnapshotCodec(), Metrics: snapshot.Metrics{Writes: snapshotWrites, Bytes: snapshotBytes,
			WriteSeconds: snapshotWriteSeconds, Refused: snapshotsRefused}}}
}

// keep adds r's store to what the snapshot holds, as its next section.
func (p *persister) keep(r *watchcache.Served) {
	p.resources = append(p.resources, r)
	p.Sources = append(p.Sources, snapshot.Source{Kind: snapshotKind(r.Resource), State: r.Store.SnapshotState})
}

// snapshotKind describes r's section to package snapshot.
func snapshotKind(r *watchcache.Resource) snapshot.Kind {
	return snapshot.Kind{Name: r.Name, GroupVersion: r.GroupVersion, Namespaced: r.Namespaced,
		OwnNodeOnly: r.OwnNodeOnly, NewList: r.NewList}
}

// newSnapshotCodec reads and writes snapshots of every section; it reads
// older wrappers' too: kube-proxy's sections alone, or with the DNS view's
// after them but no ServiceCIDRs.
func newSnapshotCodec() snapshot.Codec {
	var kinds []snapshot.Kind
	for _, r := range snapshotResources() {
		kinds = append(kinds, snapshotKind(r))
	}
	return snapshot.NewCodec(kinds, len(kubeProxyResources), len(kubeProxyResources)+len(dnsSnapshotResources))
}
