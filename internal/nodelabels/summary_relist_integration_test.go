package nodelabels

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// summaryRequests keeps, in order, a client's requests of
// NodeLabelSummaries that reached the apiserver, with what each list
// answered, and can cut the client off: its requests refused and its open
// watches ended.
type summaryRequests struct {
	mu      sync.Mutex
	start   time.Time
	sent    []summaryRequest
	refuse  bool
	watches map[*watchBody]struct{}
}

// summaryRequest: a list in full (the summaries), a list of their
// metadata, or a watch, from resourceVersion rv; got is what a list
// answered: its resourceVersion and each summary's name@resourceVersion.
type summaryRequest struct {
	at       time.Duration
	kind, rv string
	got      string
}

const (
	fullList = "full list"
	metaList = "metadata list"
	watching = "watch"
)

func (s *summaryRequests) wrap(cfg *rest.Config) *rest.Config {
	s.start = time.Now()
	s.watches = map[*watchBody]struct{}{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !strings.HasSuffix(r.URL.Path, "/nodelabelsummaries") {
				return next.RoundTrip(r)
			}
			kind := fullList
			switch {
			case r.URL.Query().Get("watch") != "":
				kind = watching
			case strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadataList"):
				kind = metaList
			}
			s.mu.Lock()
			if s.refuse {
				s.mu.Unlock()
				return nil, errors.New("refused by the test")
			}
			i := len(s.sent)
			s.sent = append(s.sent, summaryRequest{at: time.Since(s.start), kind: kind, rv: r.URL.Query().Get("resourceVersion")})
			s.mu.Unlock()
			res, err := next.RoundTrip(r)
			s.mu.Lock()
			defer s.mu.Unlock()
			switch {
			case err != nil:
				s.sent[i].got = err.Error()
				return nil, err
			case s.refuse:
				// Cut while it was asked: no answer reaches the client
				// once it is cut, however late the apiserver gave it.
				res.Body.Close()
				s.sent[i].got = "cut by the test"
				return nil, errors.New("cut by the test")
			case kind == watching:
				s.sent[i].got = res.Status
				b := &watchBody{ReadCloser: res.Body, s: s}
				s.watches[b] = struct{}{}
				res.Body = b
			default:
				s.sent[i].got = readList(res)
			}
			return res, nil
		})
	})
	return cfg
}

// listScheme decodes what a list of summaries, or of their metadata,
// answered (JSON or protobuf).
var listScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(superedgev1.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	return s
}()

// readList describes res, a list's answer, and leaves its body to be read
// again.
func readList(res *http.Response) string {
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return fmt.Sprintf("%s, body: %v", res.Status, err)
	}
	if res.StatusCode != http.StatusOK {
		return res.Status
	}
	obj, _, err := serializer.NewCodecFactory(listScheme).UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return fmt.Sprintf("%s, undecodable: %v", res.Status, err)
	}
	l, err := meta.ListAccessor(obj)
	if err != nil {
		return fmt.Sprintf("%s, %T", res.Status, obj)
	}
	var items []string
	_ = meta.EachListItem(obj, func(o runtime.Object) error {
		if m, err := meta.Accessor(o); err == nil {
			items = append(items, m.GetName()+"@"+m.GetResourceVersion())
		}
		return nil
	})
	return fmt.Sprintf("at %s: %s", l.GetResourceVersion(), strings.Join(items, " "))
}

// watchBody is an open watch's answer, which a cut ends.
type watchBody struct {
	io.ReadCloser
	s *summaryRequests
}

func (b *watchBody) Close() error {
	b.s.mu.Lock()
	delete(b.s.watches, b)
	b.s.mu.Unlock()
	return b.ReadCloser.Close()
}

// mark is where the requests sent from now on begin.
func (s *summaryRequests) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// since returns the requests sent since mark m.
func (s *summaryRequests) since(m int) []summaryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent[m:])
}

func count(reqs []summaryRequest, kind string) (n int) {
	for _, r := range reqs {
		if r.kind == kind {
			n++
		}
	}
	return n
}

func describe(reqs []summaryRequest) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "\n\t%8.3fs %s from %q: %s", r.at.Seconds(), r.kind, r.rv, r.got)
	}
	if b.Len() == 0 {
		return " none"
	}
	return b.String()
}

// cut refuses the client's requests from now on and ends its open watches:
// nothing the apiserver answers after cut returned reaches the client.
func (s *summaryRequests) cut() {
	s.mu.Lock()
	s.refuse = true
	open := slices.Collect(maps.Keys(s.watches))
	clear(s.watches)
	s.mu.Unlock()
	for _, b := range open {
		b.ReadCloser.Close()
	}
}

func (s *summaryRequests) restore() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = false
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestSummariesRelistByMetadata: after an apiserver restart with etcd
// compacted meanwhile (every watch ends in 410), the source relists the
// summaries by their metadata alone when none changed, and in full when one
// changed while it could not ask; either way it follows them.
func TestSummariesRelistByMetadata(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{CRDs: true})
	admin := versioned.NewForConfigOrDie(cp.Config)
	for _, s := range []*struct{ name, zone string }{{"nodes-0", "a"}, {"nodes-1", "b"}} {
		if _, err := admin.SuperedgeV1().NodeLabelSummaries().Create(t.Context(),
			summary(s.name, map[string]string{"node-" + s.name: s.zone}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := &summaryRequests{}
	cfg := reqs.wrap(cp.Config)
	meta := metadata.NewForConfigOrDie(cfg)
	sink := &recorder{labels: map[string]map[string]string{}}
	src := New(versioned.NewForConfigOrDie(cfg), meta, Nodes{
		NewInformer: func() cache.SharedIndexInformer {
			return metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("nodes"), "", 0, cache.Indexers{}, nil).Informer()
		},
		Labels: func(any) (string, map[string]string, bool) { return "", nil, false },
	}, sink)
	src.Backoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	zoneOf := func(node string) (zone string) {
		src.locked(func() { zone = sink.labels[node]["zone"] })
		return zone
	}
	testwait.Eventually(t.Context(), t, time.Minute, "summaries followed", func(context.Context) error {
		if !src.HasSynced() || zoneOf("node-nodes-0") != "a" || zoneOf("node-nodes-1") != "b" {
			return fmt.Errorf("synced %v, zones %q %q", src.HasSynced(), zoneOf("node-nodes-0"), zoneOf("node-nodes-1"))
		}
		return nil
	})
	restart := func() {
		t.Helper()
		cp.StopAPIServer()
		if _, err := cp.CompactEtcd(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := cp.StartAPIServer(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	// relisted waits until the source listed the summaries and watched them
	// again since mark m, and returns its requests since m. The reflector
	// watches only once its list returned: a full list after the metadata's
	// comes before that watch.
	relisted := func(m int, since string) (sent []summaryRequest) {
		t.Helper()
		testwait.Eventually(t.Context(), t, 2*time.Minute, "the summaries relisted and watched again "+since, func(context.Context) error {
			sent = reqs.since(m)
			if i := slices.IndexFunc(sent, func(r summaryRequest) bool { return r.kind != watching }); i < 0 || count(sent[i:], watching) == 0 {
				return fmt.Errorf("no list followed by a watch yet; requests %s:%s", since, describe(sent))
			}
			return nil
		})
		return sent
	}

	// Nothing changed: the metadata tells, no summary is listed again.
	m := reqs.mark()
	restart()
	if sent := relisted(m, "since the restart"); count(sent, fullList) != 0 {
		t.Errorf("the summaries were listed in full after the restart, none changed; requests since the restart:%s", describe(sent))
	}
	if zoneOf("node-nodes-0") != "a" || zoneOf("node-nodes-1") != "b" {
		t.Errorf("zones after the restart %q %q, want a b", zoneOf("node-nodes-0"), zoneOf("node-nodes-1"))
	}

	// One changed while the source could not ask: listed in full. It
	// changes before the restart: the source relists from its last
	// resourceVersion, which the watch cache may answer at any later one,
	// so a cache not yet holding a change made after the restart could
	// answer without it (and the watch bring it, no full list needed); the
	// restarted apiserver's cache, filled from etcd after the change,
	// holds it.
	reqs.cut()
	s, err := admin.SuperedgeV1().NodeLabelSummaries().Get(t.Context(), "nodes-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Nodes[0].Labels["zone"] = "c"
	if s, err = admin.SuperedgeV1().NodeLabelSummaries().Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restart()
	m = reqs.mark()
	reqs.restore()
	if sent := relisted(m, "since the source could ask again"); count(sent, fullList) == 0 {
		t.Errorf("a summary changed while the source could not ask (nodes-1 now at %s), and it was not listed in full; requests since the source could ask again:%s", s.ResourceVersion, describe(sent))
	}
	testwait.Eventually(t.Context(), t, 2*time.Minute, "the changed summary followed", func(context.Context) error {
		if zoneOf("node-nodes-1") != "c" {
			return fmt.Errorf("node-nodes-1's zone %q, want c; requests since the source could ask again:%s", zoneOf("node-nodes-1"), describe(reqs.since(m)))
		}
		return nil
	})
	if zoneOf("node-nodes-0") != "a" {
		t.Errorf("node-nodes-0's zone %q, want a", zoneOf("node-nodes-0"))
	}
}
