package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Counting LIST requests, from sources independent of the code under test:
// the apiserver's audit log (the wrapper's upstream LISTs, by its
// ServiceAccount) and the wrapper's own request counter (the LISTs kube-proxy
// sent it: kube-proxy's relists).

// WrapperUser is the identity the wrapper's upstream requests carry (its
// shipped ServiceAccount).
const WrapperUser = "system:serviceaccount:edge-system:application-grid-wrapper"

// auditPolicy records every LIST by the wrapper, once, when complete; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  verbs: [list]
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

// UpstreamList is one LIST the apiserver served to a wrapper.
type UpstreamList struct {
	Node     string // the node whose address the request came from
	SourceIP string
	Resource string
	Time     time.Time
}

// UpstreamLists returns the LISTs the apiserver's audit log holds for
// WrapperUser, in order. Every wrapper runs in its node's namespace, so the
// source IP names the node.
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
		if ev.Verb != "list" || ev.User.Username != WrapperUser || ev.ObjectRef == nil || len(ev.SourceIPs) == 0 {
			continue
		}
		out = append(out, UpstreamList{
			Node: byIP[ev.SourceIPs[0]], SourceIP: ev.SourceIPs[0],
			Resource: ev.ObjectRef.Resource, Time: ev.StageTimestamp.Time,
		})
	}
	return out, sc.Err()
}

// WrapperRequests returns the node's wrapper counter
// application_grid_wrapper_requests_total summed by verb and resource
// ("list/services" -> n), read from its /metrics.
func (n *Node) WrapperRequests(ctx context.Context) (map[string]int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.NS.DialContext}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+WrapperAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: wrapper /metrics: %s", n.Name, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: wrapper /metrics: %w", n.Name, err)
	}
	out := map[string]int{}
	fam, ok := families["application_grid_wrapper_requests_total"]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[labels["verb"]+"/"+labels["resource"]] += int(m.GetCounter().GetValue())
	}
	return out, nil
}
