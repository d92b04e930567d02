package wrapper_test

import (
	"maps"
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// resourceTap counts one client's requests to the apiserver by resource:
// full lists (a LIST, or a watch-list: a WATCH with sendInitialEvents) and
// the bytes they brought, failed calls (an error or a status >= 400), every
// byte read (in all and by resource), and open watches; of the full lists,
// the watch-lists and those the server gzipped (which Go's transport
// decompressed: resp.Uncompressed).
type resourceTap struct {
	mu sync.Mutex
	tapCounts
}

// tapCounts is a copy of a resourceTap's counts.
type tapCounts struct {
	lists, failed, open map[string]int
	watchLists, gzipped map[string]int
	listBytes, bytesBy  map[string]int64
	bytes               int64
}

func newResourceTap() *resourceTap {
	return &resourceTap{tapCounts: tapCounts{lists: map[string]int{}, failed: map[string]int{}, open: map[string]int{}, watchLists: map[string]int{}, gzipped: map[string]int{}, listBytes: map[string]int64{}, bytesBy: map[string]int64{}}}
}

func (rt *resourceTap) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			q := r.URL.Query()
			resource := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			watch := q.Get("watch") == "true" || q.Get("watch") == "1"
			full := r.Method == http.MethodGet && (!watch || q.Get("sendInitialEvents") == "true")
			resp, err := next.RoundTrip(r)
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if err != nil || resp.StatusCode >= 400 {
				rt.failed[resource]++
				return resp, err
			}
			if full {
				rt.lists[resource]++
				if watch {
					rt.watchLists[resource]++
				}
				if resp.Uncompressed {
					rt.gzipped[resource]++
				}
			}
			resp.Body = &countingBody{ReadCloser: resp.Body, add: func(n int) {
				rt.mu.Lock()
				rt.bytes += int64(n)
				rt.bytesBy[resource] += int64(n)
				if full {
					rt.listBytes[resource] += int64(n)
				}
				rt.mu.Unlock()
			}}
			if watch {
				rt.open[resource]++
				var once sync.Once
				resp.Body = &closeHook{ReadCloser: resp.Body, closed: func() {
					once.Do(func() {
						rt.mu.Lock()
						rt.open[resource]--
						rt.mu.Unlock()
					})
				}}
			}
			return resp, nil
		})
	})
	return cfg
}

func (rt *resourceTap) counts() tapCounts {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return tapCounts{maps.Clone(rt.lists), maps.Clone(rt.failed), maps.Clone(rt.open), maps.Clone(rt.watchLists), maps.Clone(rt.gzipped),
		maps.Clone(rt.listBytes), maps.Clone(rt.bytesBy), rt.bytes}
}
