package wrapper

import (
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/servicegroup/servicegroup/wrapper/watchcache"
)

// clientBudgets shares one kind of slot (connections, watches, or other
// requests) among the API port's local clients by the uid that owns their
// socket (peeruid.go). Root, which kube-proxy and the node's CoreDNS run as, may
// hold up to the whole total (the outer max-in-flight filter's); every
// other uid, and clients of unknown uid together, at most perUID; and all
// of those together at most total-perUID, so root always keeps perUID
// slots however many other uids fill theirs.
type clientBudgets struct {
	kind          string // "connections", "watches" or "requests", for the 429 and the metric
	perUID        int
	nonRootTotal  int
	mu            sync.Mutex
	held          map[clientUID]int
	nonRootHeld   int
	metricBuckets map[clientUID]string
}

// maxUIDLabels bounds the uid label of the per-client metrics: uids are
// few on a node, and the ones past this share "other".
const maxUIDLabels = 16

// newClientBudgets shares total slots of kind, perUID at most to each uid
// but root (CheckUIDBudget has checked them).
func newClientBudgets(kind string, total, perUID int) *clientBudgets {
	return &clientBudgets{kind: kind, perUID: perUID, nonRootTotal: total - perUID,
		held: map[clientUID]int{}, metricBuckets: map[clientUID]string{}}
}

// acquire takes a slot for c, or says why c may not have one now.
func (b *clientBudgets) acquire(c clientUID) (refused string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.isRoot() {
		switch {
		case b.held[c] >= b.perUID:
			return fmt.Sprintf("%s hold%s as many %s as one local user may (%d)", c.who(), c.verbS(), b.kind, b.perUID)
		case b.nonRootHeld >= b.nonRootTotal:
			return fmt.Sprintf("local users other than root hold all the %s they may together (%d)", b.kind, b.nonRootTotal)
		}
		b.nonRootHeld++
	}
	b.held[c]++
	clientHeld.WithLabelValues(b.kind, b.label(c)).Inc()
	return ""
}

func (b *clientBudgets) release(c clientUID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[c]--; b.held[c] <= 0 {
		delete(b.held, c)
	}
	if !c.isRoot() {
		b.nonRootHeld--
	}
	clientHeld.WithLabelValues(b.kind, b.label(c)).Dec()
}

// refused counts a refusal of c.
func (b *clientBudgets) refused(c clientUID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clientRefusals.WithLabelValues(b.kind, b.label(c)).Inc()
}

// label is c's value of the metrics' uid label (under b.mu).
func (b *clientBudgets) label(c clientUID) string {
	if l, ok := b.metricBuckets[c]; ok {
		return l
	}
	l := c.String()
	if len(b.metricBuckets) >= maxUIDLabels {
		l = "other"
	}
	b.metricBuckets[c] = l
	return l
}

// withClientBudgets answers 429 with Retry-After to a request whose
// client has no slot left of its kind (watches, or everything else).
func withClientBudgets(next http.Handler, watches, requests *clientBudgets) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b := requests
		if info, ok := request.RequestInfoFrom(req.Context()); ok && info.Verb == "watch" {
			b = watches
		}
		c, identified := clientOf(req)
		if !identified {
			next.ServeHTTP(w, req)
			return
		}
		if refused := b.acquire(c); refused != "" {
			b.refused(c)
			watchcache.WriteError(w, req, apierrors.NewTooManyRequests(refused+": please try again later", 1))
			return
		}
		defer b.release(c)
		next.ServeHTTP(w, req)
	})
}

var (
	clientHeld = metric.GaugeVec("client_held",
		"Connections, watches and other requests (kind) the API port's clients hold, by the uid owning the client's socket (\"unknown\": another host or not found; \"other\": past the first 16 uids).",
		"kind", "uid")
	clientRefusals = metric.CounterVec("client_refused_total",
		"Connections closed at once and requests answered 429 because their client's uid held its budget of that kind, by uid as in client_held.",
		"kind", "uid")
)

// CheckUIDBudget checks a per-uid budget option (named name) against its
// total (totalName).
func CheckUIDBudget(name string, perUID int, totalName string, total int) error {
	if perUID < 1 || 2*perUID > total {
		return fmt.Errorf("%s is %d: it must be at least 1 and at most half of %s (%d), so that root's clients (kube-proxy, the node's CoreDNS) always keep as many",
			name, perUID, totalName, total)
	}
	return nil
}
