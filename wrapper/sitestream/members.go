package sitestream

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// A wrapper cut from the cloud but not from its site cannot read the Lease,
// so on its own it would not learn who leads after its leader changes (or,
// as an ex-leader, who took over). Its site's peers can tell it: every
// wrapper answers, on its peer port, who it follows (or that it leads) and
// which of the site's wrappers it has heard of. A wrapper asks them only
// while it has no usable leader and has not read the Lease lately: with the
// cloud reachable the Lease alone decides.
//
// The answer comes from a wrapper authenticated like any peer (its
// certificate pinned, its token reviewed as one of the site's wrappers'),
// and names a leader by the identity the Lease would: the follower then
// reaches that leader pinned to the certificate the answer names. A
// compromised wrapper of the site can mislead it this way, as it could by
// writing the Lease (README.md, threat model).

const (
	// peerHeader carries a wrapper's own identity (what it would write into
	// the Lease) on its requests to its site's peers.
	peerHeader = "X-Application-Grid-Wrapper-Peer"
	// sitePath answers who this wrapper follows and whom it has heard of.
	sitePath = "/site"
	// membersRefresh is how often a follower reads its leader's members.
	membersRefresh = 10 * time.Second
	// peerAskTimeout bounds one question to a peer.
	peerAskTimeout = 3 * time.Second
)

// readLock records when the Lease was last read from the apiserver, and
// this wrapper's Lease writes: when the last successful one was sent and
// answered, and when one last failed.
type readLock struct {
	resourcelock.Interface
	lastRead atomic.Int64 // unix nanoseconds
	written  atomic.Pointer[leaseWrite]
	failed   atomic.Int64 // unix nanoseconds of the last failed Get, Create or Update
}

// leaseWrite is a successful write of the Lease: sent at from, answered at.
type leaseWrite struct{ from, at time.Time }

func (l *readLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil || apierrors.IsNotFound(err) {
		l.lastRead.Store(time.Now().UnixNano())
	} else {
		l.failed.Store(time.Now().UnixNano())
	}
	return rec, raw, err
}

func (l *readLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(func() error { return l.Interface.Create(ctx, rec) })
}

func (l *readLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.write(func() error { return l.Interface.Update(ctx, rec) })
}

func (l *readLock) write(f func() error) error {
	from := time.Now()
	err := f()
	if err == nil {
		l.written.Store(&leaseWrite{from: from, at: time.Now()})
	} else {
		l.failed.Store(time.Now().UnixNano())
	}
	return err
}

// When a leader serves its peers. Its last successful Lease write must
// have been
//
//   - sent less than LeaseDuration - HeartbeatInterval ago: another wrapper
//     takes the Lease only once it has seen it unchanged for LeaseDuration,
//     and it cannot see this write before it was sent, so the leader has
//     stopped serving (its open peer watches end at the next heartbeat) by
//     the time another can lead: two leaders never both serve;
//   - answered less than renewWindow (5 s) ago, or less than RenewDeadline
//     (10 s) ago while no Lease request has failed since. A leader cut from
//     the cloud hears no more changes: one whose link refuses or resets
//     (its requests fail at once) stops 5 s after its link last answered,
//     one whose packets are dropped (its renewal hangs) 10 s after, its
//     followers then resuming from the apiserver within the 15 s bound
//     (README.md, Failover). A slow apiserver fails no request, so its
//     leader keeps serving while each renewal (client-go sends the next a
//     RetryPeriod after the last answer) is answered within RenewDeadline
//     of the last answer and within LeaseDuration - HeartbeatInterval of
//     the last sending: renewals taking up to 6 s each with the defaults
//     (15 s, 10 s, 2 s, 1 s: 2 x 6 s + 2 s = 14 s), against 3 s when every
//     renewal had to be answered within 5 s of the last (fleet-scale.md:
//     1,798 pauses in 5 minutes at 1,000 site wrappers, load 8-9).
//
// client-go's elector keeps its leadership until a renewal poll, begun a
// RetryPeriod after the last answer, has failed for RenewDeadline (12 s
// after that answer with the defaults); losing it ends the serving too
// (OnStoppedLeading).

// renewWindow is how recently a leader must have had a Lease write answered
// to serve its peers once a Lease request has failed since: half the
// RenewDeadline (5 s: two renewals missed with the defaults), but room for
// two renewals and a slow answer, and never beyond the RenewDeadline.
func (ss *Stream) renewWindow() time.Duration {
	return min(max(ss.opts.RenewDeadline/2, 2*ss.opts.RetryPeriod+time.Second), ss.opts.RenewDeadline)
}

// holdWindow is how recently a leader must have sent its last successful
// Lease write to serve its peers.
func (ss *Stream) holdWindow() time.Duration {
	return ss.opts.LeaseDuration - ss.opts.HeartbeatInterval
}

// renewedRecently reports whether this wrapper may serve its peers, by its
// Lease writes (above); with Options.ServeOnlyRightAfterRenewal, by the
// rule before: a write answered within renewWindow.
func (ss *Stream) renewedRecently() bool {
	l := ss.lock.Load()
	if l == nil {
		return false
	}
	w := l.written.Load()
	if w == nil {
		return false
	}
	answered := time.Since(w.at)
	if ss.opts.ServeOnlyRightAfterRenewal {
		return answered < ss.renewWindow()
	}
	if time.Since(w.from) >= ss.holdWindow() {
		return false
	}
	return answered < ss.renewWindow() || (answered < ss.opts.RenewDeadline && l.failed.Load() < w.at.UnixNano())
}

// view is what this wrapper answers at sitePath.
func (ss *Stream) view() siteid.View {
	v := siteid.View{Members: ss.members.List()}
	if ss.peers.leading() != nil && ss.peers.synced() {
		v.Leader = ss.router.self
	} else if t := ss.router.source(); t != nil {
		v.Leader = siteid.Identity(t.node, t.addr, t.pin)
	}
	return v
}

func (p *peerServer) serveSite(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(p.ss.view())
}

// askPeers runs with the election: when this wrapper has no usable leader,
// does not serve its peers, and has not read the Lease for two
// RetryPeriods, it asks the site's wrappers it knows who leads, every
// RetryPeriod, and follows the first leader named that it has not given up.
func (ss *Stream) askPeers(ctx context.Context, logger klog.Logger, lock *readLock) {
	onTicks(ctx, ss.opts.RetryPeriod, func() {
		following, _ := ss.router.following()
		if following || ss.peers.leading() != nil || time.Since(time.Unix(0, lock.lastRead.Load())) < 2*ss.opts.RetryPeriod {
			return
		}
		if leader := ss.askForLeader(ctx); leader != "" {
			logger.Info("The Lease cannot be read: following the leader a peer names", "leader", leader)
			ss.router.follow(logger, leader, false)
		}
	})
}

// askForLeader asks every known member at once; the first usable leader
// named wins.
func (ss *Stream) askForLeader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, peerAskTimeout)
	defer cancel()
	members := ss.members.List()
	answers := make(chan siteid.View, len(members))
	asked := 0
	for _, id := range members {
		if id == ss.router.self {
			continue
		}
		_, addr, pin, _ := siteid.Parse(id)
		asked++
		go func() {
			v, err := ss.router.askSite(ctx, &peerTarget{addr: addr, pin: pin, transport: pinnedTransport(pin)})
			if err != nil {
				klog.FromContext(ctx).V(2).Info("A site peer did not say who leads", "peer", addr, "err", err)
			}
			answers <- v
		}()
	}
	for range asked {
		select {
		case <-ctx.Done():
			return ""
		case v := <-answers:
			ss.members.Add(v.Members...)
			if v.Leader != "" && v.Leader != ss.router.self && !ss.router.givenUp(v.Leader) {
				return v.Leader
			}
		}
	}
	return ""
}

// askSite reads a peer's siteid.View.
func (r *peerRouter) askSite(ctx context.Context, t *peerTarget) (siteid.View, error) {
	defer t.transport.CloseIdleConnections()
	var v siteid.View
	resp, err := r.peerGet(ctx, t, sitePath)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v)
	return v, err
}

// givenUp reports whether id is the leader this wrapper has given up.
func (r *peerRouter) givenUp(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader != nil && siteid.Identity(r.leader.node, r.leader.addr, r.leader.pin) == id && !r.badUntil.IsZero()
}
