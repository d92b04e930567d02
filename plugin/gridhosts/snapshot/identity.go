package snapshot

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
)

// Identity is the snapshot's: the one its header names (this block's node
// under the UID the apiserver gave it when the snapshot was written), else
// as snapshottrust.IdentityOf finds it among the nodes the snapshot holds
// (snapshots written before headers named it).
func (b *Body) Identity(h Header, self string) snapshottrust.Identity {
	if h.Identity.Node != "" {
		return h.Identity
	}
	return snapshottrust.IdentityOf(self, func(yield func(string, types.UID) bool) {
		for i := range b.Nodes {
			if !yield(b.Nodes[i].Meta.Name, b.Nodes[i].Meta.UID) {
				return
			}
		}
	})
}
