package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/autonomy"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	gridinformers "github.com/servicegroup/servicegroup/client/informers/externalversions"
	gridlisters "github.com/servicegroup/servicegroup/client/listers/superedge/v1"
)

// state is what the rule reads, from informers that keep only that: every
// Node's labels and Ready condition, and the grids' keys and annotations.
type state struct {
	nodes  corelisters.NodeLister
	dgs    gridlisters.DeploymentGridLister
	ssgs   gridlisters.StatefulSetGridLister
	synced []cache.InformerSynced
	start  func(ctx context.Context)

	// invalid remembers the annotation values already reported as invalid,
	// per grid, so each is reported once.
	mu      sync.Mutex
	invalid map[string]string
}

func newState(kube kubernetes.Interface, grids versioned.Interface, resync time.Duration) *state {
	kf := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTransform(slimNode))
	gf := gridinformers.NewSharedInformerFactoryWithOptions(grids, resync, gridinformers.WithTransform(slimGrid))
	nodes, dgs, ssgs := kf.Core().V1().Nodes(), gf.Superedge().V1().DeploymentGrids(), gf.Superedge().V1().StatefulSetGrids()
	s := &state{
		nodes: nodes.Lister(), dgs: dgs.Lister(), ssgs: ssgs.Lister(),
		synced:  []cache.InformerSynced{nodes.Informer().HasSynced, dgs.Informer().HasSynced, ssgs.Informer().HasSynced},
		invalid: map[string]string{},
	}
	s.start = func(ctx context.Context) { kf.Start(ctx.Done()); gf.Start(ctx.Done()) }
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

// slimNode keeps a Node's name, labels and Ready condition.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{c}
		}
	}
	return slim, nil
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

// nodeOf is what the rule reads of a Node.
func nodeOf(n *corev1.Node) autonomy.Node {
	out := autonomy.Node{Name: n.Name, Labels: n.Labels}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
			out.Unreachable, out.Since = true, c.LastTransitionTime.Time
		}
	}
	return out
}

// InUnit lists the nodes whose label key has value.
func (s *state) InUnit(key, value string) []autonomy.Node {
	sel := labels.SelectorFromSet(labels.Set{key: value})
	nodes, _ := s.nodes.List(sel)
	out := make([]autonomy.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, nodeOf(n))
	}
	return out
}

// allNodes is every node as the rule reads it.
func (s *state) allNodes() autonomy.Nodes {
	nodes, _ := s.nodes.List(labels.Everything())
	out := make(autonomy.Nodes, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, nodeOf(n))
	}
	return out
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
