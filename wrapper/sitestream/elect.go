package sitestream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// siteLeaseName is the Lease the wrappers of a site elect their leader
// with. A label value may hold what an object name may not (capitals,
// "_"; `Shop_1`): such a site's Lease is named by the value made lower
// case with every other character as "-", and a hash of the value itself,
// so that two values never share a Lease.
func siteLeaseName(group string) string {
	const prefix = "application-grid-wrapper-site-"
	if name := prefix + group; len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(group))
	clean := strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, group), "-")
	if clean != "" {
		clean += "-"
	}
	return prefix + clean + hex.EncodeToString(sum[:5])
}

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
		LeaseMeta:  metav1.ObjectMeta{Namespace: ss.opts.Namespace, Name: siteLeaseName(group)},
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
			Name:            siteLeaseName(group),
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
