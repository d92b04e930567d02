package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Counting (re)lists, from sources independent of the code under test: the
// apiserver's audit log for the wrapper's upstream requests (by its
// ServiceAccount), and kube-proxy's own log for kube-proxy's relists. A
// client-go informer fetches the full state with a LIST, or (WatchListClient,
// on by default since 1.35) with a WATCH that sends initial events; a WATCH
// from a resourceVersion resumes and fetches nothing again.

// WrapperUser is the identity the wrapper's upstream requests carry (its
// shipped ServiceAccount).
const WrapperUser = "system:serviceaccount:edge-system:servicegroup-wrapper"

// auditPolicy records the wrapper's LISTs (when complete) and WATCHes (when
// started, and when complete); nothing else. Its LISTs of NodeLabelSummaries
// keep their answer: a relist asks the summaries' metadata first
// (internal/nodelabels), and only the answer's kind tells that from a full
// list.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [list]
  users: ["` + WrapperUser + `"]
  resources: [{group: superedge.io, resources: [nodelabelsummaries]}]
- level: Metadata
  verbs: [list, watch]
  users: ["` + WrapperUser + `"]
- level: None
`

// auditArgs writes the policy and returns the apiserver flags that log to
// dir/audit.log (appended across apiserver restarts).
func auditArgs(dir string) ([]string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + log, "--audit-log-format=json", "--audit-log-mode=blocking"}, log, nil
}

// UpstreamList is one full-state fetch (LIST, or WATCH with initial events)
// the apiserver served to a wrapper, or a resumed WATCH.
type UpstreamList struct {
	Node     string // the node whose address the request came from
	SourceIP string
	Resource string
	// Informer tells a client's informers apart: the resource with its
	// field and label selectors ("nodes?fieldSelector=metadata.name=node1").
	Informer string
	// UserAgent says whose request it was: the wrapper's own informers, or
	// kube-proxy's, forwarded by the wrapper (ServiceCIDRs).
	UserAgent string
	// Kind is "list", "metadata-list" (a LIST of the objects' metadata
	// alone, which fetches no object), "watch-list" (a WATCH sending the
	// current state first) or "resume" (a WATCH from a resourceVersion).
	Kind string
	Time time.Time
}

// UpstreamLists returns the full-state fetches and resumed watches the
// apiserver's audit log holds for WrapperUser, in order: LISTs that
// completed with 200, WATCHes that started with 200. Every wrapper runs in its node's
// namespace, so the source IP names the node.
func (c *Cluster) UpstreamLists() ([]UpstreamList, error) {
	f, err := os.Open(c.auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byIP := map[string]string{}
	for _, n := range c.Nodes {
		byIP[n.IP.String()] = n.Name
	}
	var out []UpstreamList
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", c.auditLog, err)
		}
		if ev.User.Username != WrapperUser || ev.ObjectRef == nil || len(ev.SourceIPs) == 0 {
			continue
		}
		u, err := url.Parse(ev.RequestURI)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.auditLog, err)
		}
		q := u.Query()
		informer := ev.ObjectRef.Resource
		for _, sel := range []string{"fieldSelector", "labelSelector"} {
			if v := q.Get(sel); v != "" {
				informer += "?" + sel + "=" + v
			}
		}
		var kind string
		switch {
		case ev.Verb == "list" && q.Get("limit") == "1":
			// A presence probe (the wrapper asks whether any
			// NodeLabelSummary exists), not a fetch of the state.
			continue
		case ev.Verb == "list" && ev.Stage == auditv1.StageResponseComplete && ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusOK:
			kind = "list"
			if metadataOnly(ev.ResponseObject) {
				kind = "metadata-list"
			}
		case ev.Verb == "watch" && ev.Stage == auditv1.StageResponseStarted && ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusOK:
			// Refused watches (e.g. 403 while the restarted apiserver's
			// authorizer catches up) fetch nothing; the client then lists.
			if rv := q.Get("resourceVersion"); q.Get("sendInitialEvents") == "true" || rv == "" || rv == "0" {
				kind = "watch-list"
			} else {
				kind = "resume"
			}
		default:
			continue
		}
		out = append(out, UpstreamList{
			Node: byIP[ev.SourceIPs[0]], SourceIP: ev.SourceIPs[0],
			Resource: ev.ObjectRef.Resource, Informer: informer, UserAgent: ev.UserAgent,
			Kind: kind, Time: ev.StageTimestamp.Time,
		})
	}
	return out, sc.Err()
}

// metadataOnly reports whether a LIST's logged answer (kept only for
// NodeLabelSummaries) held the objects' metadata alone.
func metadataOnly(answer *runtime.Unknown) bool {
	if answer == nil {
		return false
	}
	var tm metav1.TypeMeta
	return json.Unmarshal(answer.Raw, &tm) == nil && tm.Kind == "PartialObjectMetadataList"
}

// Relists counts, per informer type, how often the process's client-go
// reflectors fetched the full state (each logs "Caches populated" at -v=2
// after a LIST or watch-list, never after resuming a watch), in its log
// from byte offset from on. Offsets come from LogSize.
func Relists(p *Process, from int64) (map[string]int, error) {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return nil, err
	}
	if from > int64(len(data)) {
		return nil, fmt.Errorf("%s: offset %d beyond its log (%d bytes)", p.Name, from, len(data))
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data[from:]), "\n") {
		if !strings.Contains(line, `"Caches populated"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `type="`)
		typ, _, _ := strings.Cut(rest, `"`)
		out[typ]++
	}
	return out, nil
}

// LogSize is the current size of the process's log (appended across restarts).
func LogSize(p *Process) (int64, error) {
	st, err := os.Stat(p.LogPath)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
