package index

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// EventHandler applies every event of an informer to x as it arrives.
func (x *Index) EventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, isInInitialList bool) { x.UpsertEvent(nil, obj, isInInitialList) },
		UpdateFunc: func(old, cur any) { x.UpsertEvent(old, cur, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			x.Delete(obj)
		},
	}
}

// UpsertEvent applies an added (old nil) or updated object from a watch:
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
