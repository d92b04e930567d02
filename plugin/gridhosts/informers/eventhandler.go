package informers

import (
	"k8s.io/client-go/tools/cache"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
)

// eventHandler applies every event of an informer to x as it arrives. An
// object deleted while the informer was away comes as a tombstone
// (cache.DeletedFinalStateUnknown), unwrapped here: the index knows no
// client-go type.
func eventHandler(x *index.Index) cache.ResourceEventHandler {
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
