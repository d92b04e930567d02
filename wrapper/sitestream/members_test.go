package sitestream

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// A follower follows, and remembers, only wrappers of nodes of its site:
// a Lease holder or a member named on another node is left out.
func TestOnlyTheSitesNodes(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	site := map[string]bool{"node0": true, "node1": true}
	r, read := routerReadingNodes(site, pin)
	r.members.InSite = func(node string) bool { return site[node] && read[node] }

	away := siteid.Identity("node-away", "10.0.0.9:51009", pin)
	r.setLeader(klog.Background(), away)
	if following, _ := r.following(); following || r.source() != nil {
		t.Errorf("follows %s, a holder on a node outside the site", away)
	}
	r.members.Add(away)
	if got := r.members.List(); len(got) != 0 {
		t.Errorf("remembers members outside the site: %v", got)
	}
	ours := siteid.Identity("node1", "10.0.0.2:51009", pin)
	r.setLeader(klog.Background(), ours)
	if s := r.source(); s == nil || s.node != "node1" {
		t.Errorf("source %+v, want node1 (a holder of the site)", s)
	}
	if got := r.members.List(); strings.Join(got, ",") != ours {
		t.Errorf("members %v, want [%s]", got, ours)
	}
}

// A peer's node is the one its token review names, and only one.
func TestBoundNode(t *testing.T) {
	for _, tc := range []struct {
		extra map[string][]string
		want  string
	}{
		{nil, ""},
		{map[string][]string{"authentication.kubernetes.io/pod-name": {"p"}}, ""},
		{map[string][]string{NodeNameExtra: {}}, ""},
		{map[string][]string{NodeNameExtra: {"a", "b"}}, ""},
		{map[string][]string{NodeNameExtra: {"node0"}}, "node0"},
	} {
		if got := boundNode(tc.extra); got != tc.want {
			t.Errorf("boundNode(%v) = %q, want %q", tc.extra, got, tc.want)
		}
	}
}

// A leader a peer names while the Lease cannot be read is followed only if
// its node was read before and found in the site: nothing vouches for a
// node never read.
func TestPeerNamedLeaderOnlyIfRead(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	site := map[string]bool{"node0": true, "node1": true, "node2": true}
	r, read := routerReadingNodes(site, pin)

	unread := siteid.Identity("node2", "10.0.0.3:51009", pin)
	r.follow(klog.Background(), unread, false)
	if s := r.source(); s != nil {
		t.Errorf("follows %s, named by a peer, whose node was never read", s.node)
	}
	if read["node2"] {
		t.Error("a leader named by a peer had its node read (the apiserver is out of reach then)")
	}
	ours := siteid.Identity("node1", "10.0.0.2:51009", pin)
	r.setLeader(klog.Background(), ours) // from the Lease: node1 is read
	r.setLeader(klog.Background(), "")
	r.follow(klog.Background(), ours, false)
	if s := r.source(); s == nil || s.node != "node1" {
		t.Errorf("source %+v, want node1 (named by a peer, read in the site before)", s)
	}
}

// A follower reads its leader's node again every peerRecheck, and stops
// following a leader whose node has left the site.
func TestLeaderLeavingTheSiteNotFollowed(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	var mu sync.Mutex
	site := map[string]bool{"node0": true, "node1": true}
	r := newPeerRouter(Options{GroupLabel: "example.com/site"}, siteid.Identity("node0", "10.0.0.1:51009", pin))
	reads := 0
	r.checkNode = func(_ context.Context, node string, _ time.Duration) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return site[node], nil
	}
	r.setLeader(klog.Background(), siteid.Identity("node1", "10.0.0.2:51009", pin))
	r.recheckLeader(t.Context(), klog.Background())
	mu.Lock()
	site["node1"] = false // relabelled into another site
	if reads != 1 {
		t.Errorf("%d reads of the leader's node, want 1 (no read again before peerRecheck)", reads)
	}
	mu.Unlock()
	r.mu.Lock()
	r.leader.checked = time.Now().Add(-peerRecheck - time.Second)
	r.mu.Unlock()
	r.recheckLeader(t.Context(), klog.Background())
	deadline := time.Now().Add(5 * time.Second)
	for r.source() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := r.source(); s != nil {
		t.Errorf("still follows %s, whose node left the site", s.node)
	}
}

// routerReadingNodes is node0's router, whose node reads answer from site
// (the nodes in it) and are recorded in read; a cached answer exists only
// for a node read before.
func routerReadingNodes(site map[string]bool, pin string) (*peerRouter, map[string]bool) {
	r := newPeerRouter(Options{GroupLabel: "example.com/site"}, siteid.Identity("node0", "10.0.0.1:51009", pin))
	read := map[string]bool{}
	r.checkNode = func(_ context.Context, node string, _ time.Duration) (bool, error) {
		read[node] = true
		return site[node], nil
	}
	r.cachedNode = func(node string) (bool, bool) { return site[node], read[node] }
	return r, read
}
