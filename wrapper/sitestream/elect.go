package sitestream

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/sitestream/siteid"
)

// elect campaigns for the site's Lease and follows whoever holds it until
// ctx ends. The leader serves its peers while it holds the Lease; one that
// cannot renew it within RenewDeadline (cut off from the cloud) stops, and
// its followers read from the apiserver or the next leader. A follower
// campaigns only while it has no usable leader (none known, or given up):
// a leader that stops serving or answering is noticed over the site
// network, so the Lease is read only then.
func (ss *Stream) elect(ctx context.Context, logger klog.Logger, group string) {
	identity := ss.router.self
	ss.router.site.Store(group)
	lease := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ss.opts.Namespace, Name: siteid.LeaseName(group)},
		Client:     ss.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		Labels:     map[string]string{"app.kubernetes.io/name": "application-grid-wrapper"},
	}
	lock := &readLock{Interface: lease}
	ss.lock.Store(lock)
	logger = logger.WithValues("site", group, "lease", lease.LeaseMeta.Namespace+"/"+lease.LeaseMeta.Name)
	// Without the cloud, the site's peers tell who leads.
	go ss.askPeers(ctx, logger, lock)
	for ctx.Err() == nil {
		// A follower whose leader serves it over the site network asks the
		// cloud nothing: it campaigns (and so reads the Lease every
		// RetryPeriod) only while it has no usable leader.
		for {
			following, changed := ss.router.following()
			if !following {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   ss.opts.LeaseDuration,
			RenewDeadline:   ss.opts.RenewDeadline,
			RetryPeriod:     ss.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            siteid.LeaseName(group),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lead context.Context) {
					logger.Info("Leading the site stream: serving peers")
					ss.peers.setLeading(lead)
				},
				OnStoppedLeading: func() {
					// Also called when a campaign ends without leading.
					if ss.peers.setLeading(nil) {
						logger.Info("No longer leading the site stream")
					}
				},
				OnNewLeader: func(holder string) { ss.router.setLeader(logger, holder) },
			},
		})
		if err != nil {
			logger.Error(err, "Site stream off")
			return
		}
		campaign, stop := context.WithCancel(ctx)
		go func() {
			// Stop campaigning once another wrapper serves this one.
			for {
				following, changed := ss.router.following()
				if following && !le.IsLeader() {
					stop()
					return
				}
				select {
				case <-campaign.Done():
					return
				case <-changed:
				}
			}
		}()
		le.Run(klog.NewContext(campaign, logger))
		stop()
		// Lost the Lease (or never got it and ctx ended): campaign again.
		select {
		case <-ctx.Done():
		case <-time.After(ss.opts.RetryPeriod):
		}
	}
}
