package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestVerifiedChildrenAnswersOnlyForTheSameVersionAndHash: a verdict holds for
// the exact child version and desired hash it was made for, and for nothing
// once the child is forgotten.
func TestVerifiedChildrenAnswersOnlyForTheSameVersionAndHash(t *testing.T) {
	var v verifiedChildren
	if v.upToDate("u1", "10", "h1") {
		t.Fatal("verdict before any comparison")
	}
	v.remember("u1", "10", "h1")
	for _, c := range []struct {
		uid, rv, hash string
		want          bool
	}{
		{"u1", "10", "h1", true},
		{"u1", "11", "h1", false}, // the child changed
		{"u1", "10", "h2", false}, // the grid wants something else
		{"u2", "10", "h1", false}, // another child
		{"u1", "10", "", false},   // no hash: never up to date
	} {
		if got := v.upToDate(types.UID(c.uid), c.rv, c.hash); got != c.want {
			t.Errorf("upToDate(%s, %s, %q) = %v, want %v", c.uid, c.rv, c.hash, got, c.want)
		}
	}
	v.remember("u1", "12", "h1")
	if v.upToDate("u1", "10", "h1") || !v.upToDate("u1", "12", "h1") {
		t.Error("a newer verdict does not replace the older")
	}
	v.forget("u1")
	if v.upToDate("u1", "12", "h1") {
		t.Error("verdict kept for a deleted child")
	}
}
