package index

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpsertEvent applies an added (old nil) or updated object from a watch (the
// informers' event handler calls it and Delete; the index knows no client):
// an update that carries the version old had is a relist's copy and changes
// nothing; a change is observed (ObserveWrite) unless it came with the
// initial list, whose writes are old.
func (x *Index) UpsertEvent(old, cur any, initial bool) {
	if old != nil && sameVersion(old, cur) {
		return
	}
	x.Upsert(cur)
	if old != nil || !initial {
		x.ObservedWrite(cur)
	}
}

// sameVersion: a and b carry the same known resourceVersion. Pods, the
// many, compare their numbers without formatting them.
func sameVersion(a, b any) bool {
	if pa, ok := a.(*PodObj); ok {
		pb, ok := b.(*PodObj)
		return ok && pa.sameRV(pb)
	}
	ma, ok := a.(metav1.Object)
	if !ok {
		return false
	}
	mb, ok := b.(metav1.Object)
	return ok && ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// ObservedWrite records the write-to-answerable latency of a change that
// came from a watch (not an initial list, whose writes are old). It takes
// no lock.
func (x *Index) ObservedWrite(obj any) {
	if x.opts.ObserveWrite == nil {
		return
	}
	if w, ok := obj.(interface{ writtenAt() time.Time }); ok && !w.writtenAt().IsZero() {
		x.opts.ObserveWrite(time.Since(w.writtenAt()))
	}
}

func (x *Index) observed(t any) {
	if x.opts.ObserveEvent == nil {
		return
	}
	if r, ok := t.(interface{ receivedAt() time.Time }); ok {
		x.opts.ObserveEvent(time.Since(r.receivedAt()))
	}
}
