package sitestream

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// NodeNameExtra is the user extra kube-apiserver puts into the TokenReview
// of a token bound to a Pod: the Pod's node (ServiceAccountTokenPodNodeInfo,
// GA in 1.32). A peer's node, and so its site, is taken from it, never
// from what the peer says about itself.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

const (
	// peerRecheck is how long a leader trusts what it read of a peer's
	// node before it reads it again, and how often a follower reads its
	// leader's node again.
	peerRecheck = 5 * time.Minute
	// nodeGetTimeout bounds one read of a node.
	nodeGetTimeout = 5 * time.Second
	// maxNodeVerdicts bounds what the peers' names can make a wrapper
	// remember.
	maxNodeVerdicts = 4 * siteid.MaxMembers
)

// errSiteUnknown: the node's site cannot be told before this wrapper's own
// is known.
var errSiteUnknown = errors.New("this wrapper's site is not known yet")

// siteNodes tells whether a node carries this site's label value: whose
// token (a leader's check of a peer) and whose Lease (a follower's check
// of the holder) a wrapper of the site trusts. It reads the one Node's
// metadata when asked, and keeps the answer: nothing watches the site's
// Nodes, so the kubelets' status reports (every node's, every few
// minutes) never reach a wrapper. A watch of the site's Nodes by every
// wrapper cost the site's cloud links N x N of them.
//
// An answer older than the caller allows is read again; when the
// apiserver cannot answer (the cloud cut), the last answer stands, as an
// informer's cache would.
type siteNodes struct {
	meta  metadata.Interface
	label string

	mu       sync.Mutex
	site     string // "" until known
	verdicts map[string]*nodeVerdict
	// reads counts the Node reads sent (tests).
	reads int64
}

type nodeVerdict struct {
	in bool
	at time.Time
	// reading is closed when a read under way ends; nil when none is.
	reading chan struct{}
}

func newSiteNodes(meta metadata.Interface, label string) *siteNodes {
	return &siteNodes{meta: meta, label: label, verdicts: map[string]*nodeVerdict{}}
}

// setSite names this wrapper's site; the verdicts are of it.
func (s *siteNodes) setSite(site string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.site != site {
		s.site, s.verdicts = site, map[string]*nodeVerdict{}
	}
}

// cached is the last answer for node, with no read: known is false when
// there is none.
func (s *siteNodes) cached(node string) (in, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.verdicts[node]
	if v == nil || v.at.IsZero() {
		return false, false
	}
	return v.in, true
}

// check tells whether node is in this site, reading its Node when the
// last answer is older than maxAge (0: always). A read that fails leaves
// the last answer, if any, standing; err only when there is none.
func (s *siteNodes) check(ctx context.Context, node string, maxAge time.Duration) (bool, error) {
	for {
		s.mu.Lock()
		if s.site == "" {
			s.mu.Unlock()
			return false, errSiteUnknown
		}
		v := s.verdicts[node]
		if v != nil && !v.at.IsZero() && maxAge > 0 && time.Since(v.at) < maxAge {
			s.mu.Unlock()
			return v.in, nil
		}
		if v != nil && v.reading != nil {
			// One read of a node at a time: wait for it and take its answer.
			wait := v.reading
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-wait:
			}
			maxAge = max(maxAge, time.Minute)
			continue
		}
		if v == nil {
			if len(s.verdicts) >= maxNodeVerdicts {
				s.pruneLocked()
			}
			v = &nodeVerdict{}
			s.verdicts[node] = v
		}
		v.reading = make(chan struct{})
		site := s.site
		s.reads++
		s.mu.Unlock()

		in, err := s.read(ctx, node, site)

		s.mu.Lock()
		close(v.reading)
		v.reading = nil
		if err == nil {
			v.in, v.at = in, time.Now()
		} else if !v.at.IsZero() {
			klog.FromContext(ctx).V(2).Info("Cannot read a node of the site again: its last answer stands", "node", node, "inSite", v.in, "readAt", v.at, "err", err)
			in, err = v.in, nil
		} else if s.verdicts[node] == v {
			delete(s.verdicts, node)
		}
		s.mu.Unlock()
		return in, err
	}
}

// read reads node's labels (its metadata only) from the apiserver.
func (s *siteNodes) read(ctx context.Context, node, site string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeGetTimeout)
	defer cancel()
	m, err := s.meta.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.Labels[s.label] == site, nil
}

// pruneLocked forgets the answers older than siteid.MemberTTL, and all of
// them if that is not enough; s.mu is held.
func (s *siteNodes) pruneLocked() {
	for node, v := range s.verdicts {
		if v.reading == nil && time.Since(v.at) > siteid.MemberTTL {
			delete(s.verdicts, node)
		}
	}
	if len(s.verdicts) >= maxNodeVerdicts {
		for node, v := range s.verdicts {
			if v.reading == nil {
				delete(s.verdicts, node)
			}
		}
	}
}
