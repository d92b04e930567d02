package gridcli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/explain"
)

// print writes report as JSON or YAML, or as tables drawn by table.
func (o *options) print(report any, table func(*table)) error {
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.streams.Out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(report)
		if err != nil {
			return err
		}
		_, err = o.streams.Out.Write(b)
		return err
	}
	t := newTable(o.streams.Out)
	table(t)
	return t.flush()
}

// table is kubectl's column layout: tab-separated rows, aligned on flush.
type table struct {
	out io.Writer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	return &table{out: w, tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
}

func (t *table) line(format string, args ...any) {
	_ = t.tw.Flush()
	fmt.Fprintf(t.out, format+"\n", args...)
}

func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printServiceReport(t *table, r explain.ServiceReport) {
	known := ""
	if !r.NodeKnown {
		known = " (node not found: no key can qualify)"
	}
	t.line("Service %s seen from node %s%s", r.Service, r.Node, known)
	switch r.Mode {
	case "unfiltered":
		t.line("No %s annotation: the wrapper serves every endpoint unchanged.", explain.TopologyKeysAnnotation)
	case "invalid":
		t.line("Invalid %s %q: %s; the wrapper serves the Service unfiltered.", explain.TopologyKeysAnnotation, r.Annotation, r.Error)
	case explain.ModeNative:
		t.line("Native mode (trafficDistribution: PreferSameZone, no %s): the wrapper passes it unchanged; the node's data plane (kube-proxy, Cilium, ztunnel...) prefers endpoints hinted for the node's zone.", explain.TopologyKeysAnnotation)
		zone := r.Zone
		if zone == "" {
			zone = "<none>"
		}
		t.line("Node zone (topology.kubernetes.io/zone): %s", zone)
		if r.Fallback != "" {
			t.line("Falls back: %s.", r.Fallback)
		} else {
			t.line("Keeps to zone %s: only the endpoints hinted for it.", r.Zone)
		}
	default:
		t.line("%s: %s", explain.TopologyKeysAnnotation, r.Annotation)
		t.row("#", "KEY", "NODE VALUE", "USABLE MATCHING", "QUALIFIED", "DECISION")
		for i, k := range r.Keys {
			value := k.Value
			if !k.HasValue {
				value = "<none>"
			}
			decision := ""
			switch {
			case k.Won:
				decision = "WINS"
			case r.Winner != "":
				decision = "not tried (an earlier key won)"
				if i < indexOf(r.Keys, r.Winner) {
					decision = "skipped: no usable endpoint"
				}
			default:
				decision = "skipped: no usable endpoint"
			}
			t.row(i+1, k.Key, value, k.Usable, yesNo(k.Qualified), decision)
		}
		if r.Winner == "" {
			t.line("No key qualified: the wrapper serves the Service's slices with no endpoints.")
		} else {
			t.line("Winner: %s", r.Winner)
		}
	}
	t.line("Endpoints served: %d of %d", len(r.Served), r.Total)
	if len(r.Served) > 0 {
		t.row("ADDRESSES", "NODE", "READY", "SERVING", "TERMINATING", "SLICE")
		for _, e := range r.Served {
			t.row(strings.Join(e.Addresses, ","), orDash(e.Node), yesNo(e.Ready), yesNo(e.Serving), yesNo(e.Terminate), e.Slice)
		}
	}
}

func indexOf(keys []explain.KeyReport, key string) int {
	for i, k := range keys {
		if k.Key == key {
			return i
		}
	}
	return -1
}

func printDNSReport(t *table, r explain.DNSReport) {
	t.line("%s seen from node %s", r.Name, r.Node)
	if r.Corefile != "" {
		t.line("Corefile: %s", r.Corefile)
	}
	t.row("STEP", "RESULT", "DETAIL")
	for _, s := range r.Steps {
		result := "ok"
		if !s.OK {
			result = "FAILED"
		}
		t.row(s.Step, result, s.Detail)
	}
	if r.Resolved {
		t.line("Answer: %s", strings.Join(r.Answers, ", "))
	} else {
		t.line("Answer: none (gridhosts does not serve this name for this node)")
	}
}

func printStatusReport(t *table, r explain.StatusReport) {
	t.line("%s %s  gridUniqKey=%s  generation=%d observed=%d", r.Kind, r.Grid, r.GridUniqKey, r.Generation, r.Observed)
	for _, c := range r.Conditions {
		t.line("  condition %s", c)
	}
	for _, p := range r.Pending {
		t.line("  pending: %s", p)
	}
	if r.Autonomy != "" {
		t.line("  autonomy: %s", r.Autonomy)
	}
	if len(r.NodeUnits) == 0 {
		t.line("No nodeunits: no node carries label %s.", r.GridUniqKey)
		return
	}
	if r.Rollout != "" {
		t.line("  rollout: %s", r.Rollout)
		t.row("NODEUNIT", "NODES", "CHILD", "TEMPLATE", "WAVE", "PHASE", "REVISION", "READY", "PENDING")
		for _, u := range r.NodeUnits {
			t.row(u.NodeUnit, u.Nodes, orDash(u.Child), orDash(u.Template), orDash(u.Wave), orDash(u.Phase), orDash(u.Revision), u.Ready, orDash(strings.Join(u.Pending, "; ")))
		}
		printConnections(t, r)
		return
	}
	t.row("NODEUNIT", "NODES", "CHILD", "TEMPLATE", "READY", "PENDING")
	for _, u := range r.NodeUnits {
		t.row(u.NodeUnit, u.Nodes, orDash(u.Child), orDash(u.Template), u.Ready, orDash(strings.Join(u.Pending, "; ")))
	}
	printConnections(t, r)
}

// printConnections lists the nodeunits with unreachable nodes under the
// table: the sentence is too long for a column.
func printConnections(t *table, r explain.StatusReport) {
	for _, u := range r.NodeUnits {
		if u.Connection != "" {
			t.line("  nodeunit %s: %s", u.NodeUnit, u.Connection)
		}
	}
}
