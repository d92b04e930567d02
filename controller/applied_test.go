package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAppliedChildren(t *testing.T) {
	obj := func(rv, hash string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{UID: "u1", ResourceVersion: rv, Annotations: map[string]string{AnnotationAppliedHash: hash}}
	}
	var a appliedChildren
	if got := a.hashOf(obj("1", "old")); got != "old" {
		t.Fatalf("nothing remembered: %q", got)
	}
	a.remember(obj("1", "old"), obj("2", "new"))
	if got := a.hashOf(obj("1", "old")); got != "new" {
		t.Fatalf("stale cache: %q, want the applied hash", got)
	}
	if got := a.hashOf(obj("2", "new")); got != "new" {
		t.Fatalf("caught up: %q", got)
	}
	// Forgotten once the cache moved on: a later change by someone else shows.
	if got := a.hashOf(obj("1", "old")); got != "old" {
		t.Fatalf("after catching up: %q", got)
	}
}
