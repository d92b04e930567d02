package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	gridlisters "github.com/servicegroup/servicegroup/client/listers/superedge/v1"
)

// state is what the rule reads of the grids, from informers that keep
// only that (their keys and annotations). Nodes are read when a decision
// needs them (nodes.go): the webhook is called only while nodes fail, and
// a watch of every Node would cost the apiserver and the controller their
// status updates all the time.
type state struct {
	dgs    gridlisters.DeploymentGridLister
	ssgs   gridlisters.StatefulSetGridLister
	synced []cache.InformerSynced
	start  func(ctx context.Context)

	// invalid remembers the annotation values already reported as invalid,
	// per grid, so each is reported once.
	mu      sync.Mutex
	invalid map[string]string
}

func newState(grids versioned.Interface, resync time.Duration) *state {
	gf := gridinformers.NewSharedInformerFactoryWithOptions(grids, resync, gridinformers.WithTransform(slimGrid))
	dgs, ssgs := gf.Superedge().V1().DeploymentGrids(), gf.Superedge().V1().StatefulSetGrids()
	s := &state{
		dgs: dgs.Lister(), ssgs: ssgs.Lister(),
		synced:  []cache.InformerSynced{dgs.Informer().HasSynced, ssgs.Informer().HasSynced},
		invalid: map[string]string{},
	}
	s.start = func(ctx context.Context) { gf.Start(ctx.Done()) }
	return s
}

func (s *state) hasSynced() bool {
	for _, f := range s.synced {
		if !f() {
			return false
		}
	}
	return true
}

// slimGrid keeps a grid's metadata (no managedFields) and key: its
// templates and status are large and none of the rule's business.
func slimGrid(obj any) (any, error) {
	switch g := obj.(type) {
	case *superedgev1.DeploymentGrid:
		return &superedgev1.DeploymentGrid{ObjectMeta: slimMeta(g.ObjectMeta), Spec: superedgev1.DeploymentGridSpec{GridUniqKey: g.Spec.GridUniqKey}}, nil
	case *superedgev1.StatefulSetGrid:
		return &superedgev1.StatefulSetGrid{ObjectMeta: slimMeta(g.ObjectMeta), Spec: superedgev1.StatefulSetGridSpec{GridUniqKey: g.Spec.GridUniqKey}}, nil
	}
	return obj, nil
}

func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Annotations: m.Annotations, DeletionTimestamp: m.DeletionTimestamp}
}

// badAnnotation is a grid whose autonomy annotation cannot be read.
type badAnnotation struct {
	ref   gridRef
	value string
	err   error
}

// gridRef names a grid for Events.
type gridRef struct {
	Kind, Namespace, Name string
	UID                   string
}

// grids are the opted-in grids; bad are those whose annotation is invalid
// and was not reported before (each value once).
func (s *state) grids() (opted []autonomy.Grid, bad []badAnnotation) {
	add := func(kind string, m metav1.ObjectMeta, key string) {
		v, ok := m.Annotations[autonomy.DurationAnnotation]
		if !ok || m.DeletionTimestamp != nil || key == "" {
			return
		}
		ref := gridRef{Kind: kind, Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
		d, err := autonomy.ParseDuration(v)
		if err != nil {
			id := fmt.Sprintf("%s/%s/%s", kind, m.Namespace, m.Name)
			s.mu.Lock()
			if s.invalid[id] != v {
				s.invalid[id] = v
				bad = append(bad, badAnnotation{ref: ref, value: v, err: err})
			}
			s.mu.Unlock()
			return
		}
		opted = append(opted, autonomy.Grid{Kind: kind, Namespace: m.Namespace, Name: m.Name, Key: key, Duration: d})
	}
	dgs, _ := s.dgs.List(labels.Everything())
	for _, g := range dgs {
		add("DeploymentGrid", g.ObjectMeta, g.Spec.GridUniqKey)
	}
	ssgs, _ := s.ssgs.List(labels.Everything())
	for _, g := range ssgs {
		add("StatefulSetGrid", g.ObjectMeta, g.Spec.GridUniqKey)
	}
	return opted, bad
}

func typesUID(s string) types.UID { return types.UID(s) }
