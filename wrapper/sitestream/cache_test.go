package sitestream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// next reads everything pending for w.
func next(t *testing.T, s *watchcache.Store, w *watchcache.Watcher) []watchcache.Event {
	t.Helper()
	evs, _, err := s.Next(w, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func upstreamSvc(name, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// A unit cache serves upstream's own versions: a list's state at the
// list's version, each event at its version, replays ignored, a watch from
// a version it has not reached yet resumed from there, and a relist makes
// open watches relist (410).
func TestUnitCacheKeepsUpstreamVersions(t *testing.T) {
	u := newUnitCache(watchcache.Services, watchcache.LogLimits{Bytes: 1 << 20, MaxLagBytes: 1 << 20})
	st := u.store
	u.reset(klog.Background(), map[string]watchcache.Object{"ns/a": upstreamSvc("a", "90")}, "100")
	if objs, rv := st.List(nil); len(objs) != 1 || rv != 100 || objs[0].GetResourceVersion() != "90" {
		t.Fatalf("after the list: %d objects at %d", len(objs), rv)
	}
	_, w, err := st.Watch(watchcache.WatchOptions{Mode: watchcache.FromVersion, RV: 100})
	if err != nil {
		t.Fatal(err)
	}
	st.ApplyAt(watch.Added, "ns/b", upstreamSvc("b", "105"), 105)
	st.ApplyAt(watch.Added, "ns/b", upstreamSvc("b", "105"), 105) // a re-watch replays it
	evs := next(t, st, w)
	if len(evs) != 1 || evs[0].RV != 105 || evs[0].Object.GetResourceVersion() != "105" {
		t.Fatalf("events %+v, want ADDED b at 105 once", evs)
	}
	// A follower that read up to 130 from the apiserver resumes here.
	_, ahead, err := st.Watch(watchcache.WatchOptions{Mode: watchcache.FromVersion, RV: 130, Bookmarks: true})
	if err != nil {
		t.Fatalf("a watch from a version not reached yet: %v", err)
	}
	st.ApplyAt(watch.Modified, "ns/a", upstreamSvc("a", "120"), 120) // it has this one
	st.ApplyAt(watch.Deleted, "ns/b", upstreamSvc("b", "140"), 140)
	evs = next(t, st, ahead)
	if len(evs) != 1 || evs[0].Type != watch.Deleted || evs[0].RV != 140 {
		t.Fatalf("events %+v, want only DELETED b at 140", evs)
	}
	// Its BOOKMARKs never go back before its own version.
	st.ProgressTo(150)
	st.Bookmark()
	if evs = next(t, st, ahead); len(evs) != 1 || evs[0].Type != watch.Bookmark || evs[0].RV != 150 {
		t.Fatalf("events %+v, want a BOOKMARK at 150", evs)
	}
	// A relist upstream: open watches relist too.
	u.reset(klog.Background(), map[string]watchcache.Object{}, "200")
	var rvErr *watchcache.VersionError
	if _, _, err := st.Next(w, nil, 10); !errors.As(err, &rvErr) || !rvErr.TooOld {
		t.Fatalf("after a relist: %v, want too old", err)
	}
	if _, _, err := st.Watch(watchcache.WatchOptions{Mode: watchcache.FromVersion, RV: 150}); !errors.As(err, &rvErr) || !rvErr.TooOld {
		t.Fatalf("resuming from before the relist: %v, want too old", err)
	}
}

// A follower accepts exactly the certificate the Lease names.
func TestPinnedTransport(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	sum := sha256.Sum256(srv.Certificate().Raw)
	right := hex.EncodeToString(sum[:])
	wrong := strings.Repeat("0", 64)
	get := func(pin string) error {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := pinnedTransport(pin).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(right); err != nil {
		t.Errorf("the pinned certificate: %v", err)
	}
	if err := get(wrong); err == nil || !strings.Contains(err.Error(), "not the one the site's Lease names") {
		t.Errorf("another certificate: %v, want a refusal", err)
	}
}
