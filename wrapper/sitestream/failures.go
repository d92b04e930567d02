package sitestream

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Peers are a site's wrappers; anyone on the site's network can connect.
// A source that keeps failing authentication (random tokens) would
// otherwise make the wrapper ask the apiserver for a TokenReview per
// request, and the reviews of real peers queue behind them (their client's
// rate limit). So each source address may fail only failureBurst times,
// then one failure per failureEvery; beyond, its requests are refused with
// 429 before any review, while other addresses are reviewed as usual.
const (
	failureEvery   = 2 * time.Second
	failureBurst   = 10
	failureSources = 4096 // addresses remembered at most
	failureForget  = 10 * time.Minute
)

type authFailures struct {
	mu      sync.Mutex
	sources map[string]*failureSource
}

type failureSource struct {
	limit *rate.Limiter
	last  time.Time
}

func newAuthFailures() *authFailures { return &authFailures{sources: map[string]*failureSource{}} }

// host is the address part of a request's RemoteAddr.
func host(remoteAddr string) string {
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return h
	}
	return remoteAddr
}

// exhausted reports whether addr has used up its failures: its requests
// are refused before any review.
func (f *authFailures) exhausted(addr string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sources[addr]
	return s != nil && s.limit.TokensAt(now) < 1
}

// failed counts a failed authentication of addr.
func (f *authFailures) failed(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sources[addr]
	if s == nil {
		if len(f.sources) >= failureSources {
			for a, old := range f.sources {
				if now.Sub(old.last) > failureForget {
					delete(f.sources, a)
				}
			}
			if len(f.sources) >= failureSources {
				return // a flood from everywhere: the connection limits bound it
			}
		}
		s = &failureSource{limit: rate.NewLimiter(rate.Every(failureEvery), failureBurst)}
		f.sources[addr] = s
	}
	s.last = now
	s.limit.AllowN(now, 1)
}
