package snapshottrust

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAtStart(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-2"}}
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		name   string
		n      *corev1.Node
		err    error
		serve  bool
		reason string
	}{
		{"same node", node, nil, true, ""},
		{"re-registered node or other cluster", other, nil, false, RefusedIdentity},
		{"no such node", nil, apierrors.NewNotFound(gr, "n1"), false, RefusedIdentity},
		{"401", nil, apierrors.NewUnauthorized("no"), false, RefusedUpstream},
		{"403", nil, apierrors.NewForbidden(gr, "n1", errors.New("no")), false, RefusedUpstream},
		{"unknown CA", nil, fmt.Errorf("get: %w", x509.UnknownAuthorityError{}), false, RefusedUpstream},
		{"wrong host", nil, fmt.Errorf("get: %w", x509.HostnameError{Host: "x", Certificate: &x509.Certificate{}}), false, RefusedUpstream},
		{"connection refused", nil, unreachable, true, ""},
		{"5xx", nil, apierrors.NewInternalError(errors.New("etcd")), true, ""},
	} {
		v := AtStart("n1", "uid-1", tc.n, tc.err)
		if v.Serve != tc.serve || v.Reason != tc.reason {
			t.Errorf("%s: %+v, want serve %v reason %q", tc.name, v, tc.serve, tc.reason)
		}
	}
}

func TestTooOld(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		written time.Time
		maxAge  time.Duration
		serve   bool
	}{
		{now.Add(-time.Hour), DefaultMaxAge, true},
		{now.Add(-DefaultMaxAge - time.Second), DefaultMaxAge, false},
		{now.Add(-DefaultMaxAge - time.Second), -1, true},
		{now.Add(-DefaultMaxAge - time.Second), 0, true},
	} {
		if v := TooOld(tc.written, tc.maxAge, now); v.Serve != tc.serve || (!v.Serve && v.Reason != RefusedTooOld) {
			t.Errorf("written %s ago, max %s: %+v", now.Sub(tc.written), tc.maxAge, v)
		}
	}
}
