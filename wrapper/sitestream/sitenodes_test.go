package sitestream

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// What siteNodes answers, and when it reads: a node is read once and its
// answer kept for the age the caller allows; a read that fails leaves the
// last answer standing, and is an error only for a node never read.
func TestSiteNodes(t *testing.T) {
	node := func(name, site string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"example.com/site": site}}}
	}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, node("a", "shop"), node("b", "away"))
	down := false
	client.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, errors.New("no route to host")
		}
		return false, nil, nil
	})
	s := newSiteNodes(client, "example.com/site")
	ctx := t.Context()
	if _, err := s.check(ctx, "a", time.Minute); !errors.Is(err, errSiteUnknown) {
		t.Errorf("before the site is known: %v, want errSiteUnknown", err)
	}
	s.setSite("shop")
	for _, tc := range []struct {
		node   string
		maxAge time.Duration
		want   bool
		reads  int64
	}{
		{"a", time.Minute, true, 1},
		{"a", time.Minute, true, 1}, // the answer kept
		{"a", 0, true, 2},           // read again
		{"b", time.Minute, false, 3},
		{"gone", time.Minute, false, 4}, // no such Node: not in the site
	} {
		in, err := s.check(ctx, tc.node, tc.maxAge)
		if err != nil || in != tc.want || s.reads != tc.reads {
			t.Errorf("check(%s, %s) = %v, %v after %d reads, want %v after %d", tc.node, tc.maxAge, in, err, s.reads, tc.want, tc.reads)
		}
	}
	down = true
	if in, err := s.check(ctx, "a", 0); err != nil || !in {
		t.Errorf("a read that fails: %v, %v, want the last answer (true)", in, err)
	}
	if in, err := s.check(ctx, "b", 0); err != nil || in {
		t.Errorf("a read that fails: %v, %v, want the last answer (false)", in, err)
	}
	if _, err := s.check(ctx, "never", 0); err == nil {
		t.Error("a node never read, with the apiserver out of reach: no error")
	}
	if _, known := s.cached("never"); known {
		t.Error("a failed first read is remembered as an answer")
	}
	if in, known := s.cached("a"); !in || !known {
		t.Errorf("cached(a) = %v, %v, want true, true", in, known)
	}
	// Another site's answers are not this one's.
	s.setSite("away")
	if _, known := s.cached("a"); known {
		t.Error("answers kept across a change of site")
	}
}
