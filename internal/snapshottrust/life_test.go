package snapshottrust

import (
	"context"
	"errors"
	"maps"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestIdentityOf(t *testing.T) {
	nodes := map[string]types.UID{"b": "uid-b", "a": "uid-a", "c": "uid-c"}
	for _, tc := range []struct {
		self string
		in   map[string]types.UID
		want Identity
	}{
		{"b", nodes, Identity{"b", "uid-b"}},
		{"z", nodes, Identity{Node: "z"}}, // its own node missing: upstream's has another UID
		{"", nodes, Identity{"a", "uid-a"}},
		{"", nil, Identity{}},
		{"b", nil, Identity{Node: "b"}},
	} {
		if got := IdentityOf(tc.self, maps.All(tc.in)); got != tc.want {
			t.Errorf("IdentityOf(%q, %v) = %+v, want %+v", tc.self, tc.in, got, tc.want)
		}
	}
}

// TestLife: the checks of one snapshot in order, and one refusal counted
// however often it is refused.
func TestLife(t *testing.T) {
	refused := prometheus.NewCounterVec(RefusedCounterOpts("t", ""), []string{"reason"})
	var age Age
	l := &Life{MaxAge: time.Hour, Refused: refused, Age: &age}
	now := time.Now()
	if v := l.Fresh(now.Add(-2*time.Hour), now); v.Serve || v.Reason != RefusedTooOld {
		t.Fatalf("two hours old, max an hour: %+v", v)
	}
	if v := l.Fresh(now.Add(-time.Minute), now); !v.Serve {
		t.Fatalf("a minute old: %+v", v)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	forbidden := apierrors.NewForbidden(corev1.Resource("nodes"), "n1", errors.New("no"))
	up := func(n *corev1.Node, err error) Upstream {
		return Upstream{
			GetNode: func(context.Context, string) (*corev1.Node, error) { return n, err },
			Probe:   func(context.Context) error { return err },
		}
	}
	for _, tc := range []struct {
		name   string
		id     Identity
		up     Upstream
		reason string // "" serves
	}{
		{"same node", Identity{"n1", "uid-1"}, up(node, nil), ""},
		{"another UID", Identity{"n1", "uid-0"}, up(node, nil), RefusedIdentity},
		{"no UID kept", Identity{Node: "n1"}, up(node, nil), RefusedIdentity},
		{"unreachable", Identity{"n1", "uid-1"}, up(nil, unreachable), ""},
		{"refuses", Identity{"n1", "uid-1"}, up(nil, forbidden), RefusedUpstream},
		{"no identity, answers", Identity{}, up(nil, nil), ""},
		{"no identity, refuses", Identity{}, up(nil, forbidden), RefusedUpstream},
	} {
		v := l.Check(t.Context(), tc.id, tc.up)
		if v.Serve != (tc.reason == "") || v.Reason != tc.reason {
			t.Errorf("%s: %+v, want reason %q", tc.name, v, tc.reason)
		}
	}

	if !l.Serve(now.Add(-time.Minute)) || age.Seconds() < 59 {
		t.Fatalf("served: age %v", age.Seconds())
	}
	v, ok := Refusal(forbidden)
	if !ok || v.Reason != RefusedUpstream {
		t.Fatalf("Refusal(403) = %+v, %v", v, ok)
	}
	if _, ok := Refusal(unreachable); ok {
		t.Fatal("an unreachable upstream counted as a refusal")
	}
	if !l.Refuse(v) || l.Refuse(v) {
		t.Fatal("Refuse: want true once, then false")
	}
	if got := testutil.ToFloat64(refused.WithLabelValues(RefusedUpstream)); got != 1 {
		t.Fatalf("refused{upstream-refuses} = %v, want 1", got)
	}
	if age.Seconds() != 0 || l.Serve(now) || !l.IsRefused() {
		t.Fatalf("after a refusal: age %v, served again or not refused", age.Seconds())
	}
}
