package webhook

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/autonomy"
)

// unitTTL is how long one read of a nodeunit's nodes answers the calls
// about it: the node lifecycle controller retries every few seconds for
// every pod of every unreachable node.
const unitTTL = 2 * time.Second

// trackFor is how long a nodeunit stays tracked (its nodes read every
// refresh, its metrics exported) after it was last seen connected.
const trackFor = time.Minute

// lastReadFor bounds how old a read may be to answer when a new one fails
// (a loaded apiserver): deciding from it errs to the safe side, since the
// node lifecycle controller retries a withheld write with a fresh view
// within seconds, while a write let through on no knowledge marks pods
// not Ready and evicts them.
const lastReadFor = trackFor

// nodes reads nodeunits' nodes from the apiserver when a decision or the
// metrics need them: nothing in steady state, one list (from the
// apiserver's watch cache, by label) per nodeunit and unitTTL while its
// nodes fail. It remembers the nodeunits it was asked about until they
// have been connected for trackFor, for the metrics.
type nodes struct {
	kube kubernetes.Interface
	now  func() time.Time

	mu      sync.Mutex
	read    map[autonomy.Unit]unitRead
	tracked map[autonomy.Unit]time.Time // when last seen with an unreachable node
	one     map[string]nodeRead         // single nodes, by name
}

type nodeRead struct {
	at   time.Time
	node autonomy.Node
}

type unitRead struct {
	at      time.Time
	members []autonomy.Node
}

func newNodes(kube kubernetes.Interface, now func() time.Time) *nodes {
	return &nodes{kube: kube, now: now, read: map[autonomy.Unit]unitRead{}, tracked: map[autonomy.Unit]time.Time{}, one: map[string]nodeRead{}}
}

// node reads one Node, at most unitTTL ago (the node lifecycle controller
// asks about each pod of a node in turn).
func (n *nodes) node(ctx context.Context, name string) (autonomy.Node, error) {
	now := n.now()
	n.mu.Lock()
	r, ok := n.one[name]
	n.mu.Unlock()
	if ok && now.Sub(r.at) < unitTTL {
		return r.node, nil
	}
	getCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	live, err := n.kube.CoreV1().Nodes().Get(getCtx, name, metav1.GetOptions{})
	if err != nil {
		if ok && now.Sub(r.at) < lastReadFor {
			klog.FromContext(ctx).V(1).Info("Reading a node failed: deciding from its last read", "node", name, "age", now.Sub(r.at), "err", err)
			return r.node, nil
		}
		return autonomy.Node{}, err
	}
	node := autonomy.NodeOf(live)
	n.mu.Lock()
	n.one[name] = nodeRead{at: now, node: node}
	for k, v := range n.one {
		if now.Sub(v.at) > trackFor {
			delete(n.one, k)
		}
	}
	n.mu.Unlock()
	return node, nil
}

// unit returns the nodes of u, read at most unitTTL ago, and tracks u.
func (n *nodes) unit(ctx context.Context, u autonomy.Unit) ([]autonomy.Node, error) {
	now := n.now()
	n.mu.Lock()
	r, ok := n.read[u]
	if _, tracked := n.tracked[u]; !tracked {
		n.tracked[u] = now
	}
	n.mu.Unlock()
	if ok && now.Sub(r.at) < unitTTL {
		return r.members, nil
	}
	members, err := n.list(ctx, u)
	if err != nil {
		if ok && now.Sub(r.at) < lastReadFor {
			klog.FromContext(ctx).V(1).Info("Reading a nodeunit's nodes failed: deciding from their last read", "key", u.Key, "value", u.Value, "age", now.Sub(r.at), "err", err)
			return r.members, nil
		}
		return nil, err
	}
	n.mu.Lock()
	n.read[u] = unitRead{at: now, members: members}
	n.mu.Unlock()
	return members, nil
}

func (n *nodes) list(ctx context.Context, u autonomy.Unit) ([]autonomy.Node, error) {
	listCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// resourceVersion 0: from the apiserver's watch cache, not etcd.
	l, err := n.kube.CoreV1().Nodes().List(listCtx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{u.Key: u.Value}).String(), ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]autonomy.Node, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, autonomy.NodeOf(&l.Items[i]))
	}
	return out, nil
}

// trackedUnits reads every tracked nodeunit afresh and returns their
// nodes; a nodeunit connected for trackFor is dropped.
func (n *nodes) trackedUnits(ctx context.Context) autonomy.Nodes {
	n.mu.Lock()
	units := make([]autonomy.Unit, 0, len(n.tracked))
	for u := range n.tracked {
		units = append(units, u)
	}
	n.mu.Unlock()
	var all autonomy.Nodes
	seen := map[string]bool{}
	now := n.now()
	for _, u := range units {
		members, err := n.list(ctx, u)
		if err != nil {
			continue // kept tracked; read again at the next refresh
		}
		failing := false
		for _, m := range members {
			failing = failing || m.Unreachable
			if !seen[m.Name] {
				seen[m.Name] = true
				all = append(all, m)
			}
		}
		n.mu.Lock()
		n.read[u] = unitRead{at: now, members: members}
		if failing {
			n.tracked[u] = now
		} else if now.Sub(n.tracked[u]) > trackFor {
			delete(n.tracked, u)
			delete(n.read, u)
		}
		n.mu.Unlock()
	}
	return all
}
