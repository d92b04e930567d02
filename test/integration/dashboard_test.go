package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testmonitoring"
)

// grafanaDashboard is the part of Grafana's dashboard JSON model the shipped
// dashboard uses; decoding rejects any other field, so a typo'd key fails.
type grafanaDashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	Description   string `json:"description"`
	Tags          []string
	SchemaVersion int    `json:"schemaVersion"`
	Version       int    `json:"version"`
	Editable      bool   `json:"editable"`
	Refresh       string `json:"refresh"`
	Time          struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Annotations struct {
		List []any `json:"list"`
	} `json:"annotations"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
			Label string `json:"label"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Datasource  struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct {
			X, Y, W, H int
		} `json:"gridPos"`
		FieldConfig *struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
			Overrides []any `json:"overrides"`
		} `json:"fieldConfig,omitempty"`
		Targets []struct {
			RefID      string `json:"refId"`
			Datasource struct {
				Type string `json:"type"`
				UID  string `json:"uid"`
			} `json:"datasource"`
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "build", "dashboards", "servicegroup.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d grafanaDashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("build/dashboards/servicegroup.json: %v", err)
	}
	return d
}

// dashboardQueries are the shipped dashboard's queries by panel.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range readDashboard(t).Panels {
		for _, q := range p.Targets {
			out[fmt.Sprintf("dashboard panel %q %s", p.Title, q.RefID)] = q.Expr
		}
	}
	return out
}

// TestDashboard checks the dashboard against Grafana's model as far as its
// fields go (identity, the datasource variable every panel uses, panel ids
// unique, known panel types, places on the grid that do not overlap, a
// query per target), every query with Prometheus's own parser (promtool
// check rules, each query as a recording rule), and every query evaluated
// by Prometheus's engine on series shaped like ours against the results
// servicegroup-test.yaml expects (promtool test rules), and the whole JSON
// against Grafana's own schema (grafana-foundation-sdk's strict decoding:
// unknown fields, wrong types, missing required fields, in the dashboard,
// its panels' options and its Prometheus queries). That its series exist is
// TestMonitoringComponent's check, against the running components. Not
// checked: how a Grafana server renders it (no Grafana runs here).
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 36 {
		t.Errorf("title %q, uid %q, schemaVersion %d: want both set and a schema Grafana 10+ reads", d.Title, d.UID, d.SchemaVersion)
	}
	if len(d.Templating.List) != 1 || d.Templating.List[0].Type != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Errorf("templating: want one Prometheus datasource variable, got %+v", d.Templating.List)
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]string{}
	var rules []map[string]string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		switch p.Type {
		case "stat", "timeseries", "table", "gauge", "bargauge":
		default:
			t.Errorf("panel %q: unknown type %q", p.Title, p.Type)
		}
		if p.Datasource.UID != "${"+d.Templating.List[0].Name+"}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want the dashboard's variable", p.Title, p.Datasource)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q", p.Title, other)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.RefID == "" || q.Expr == "" {
				t.Errorf("panel %q: target %+v without refId or expr", p.Title, q)
			}
			if q.Datasource != p.Datasource {
				t.Errorf("panel %q: target %s's datasource %+v, want the panel's", p.Title, q.RefID, q.Datasource)
			}
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel_%d:%s", p.ID, q.RefID), "expr": q.Expr})
		}
	}

	promtool := testmonitoring.Promtool(t)
	file := filepath.Join(t.TempDir(), "queries.yaml")
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("a dashboard query does not parse (promtool check rules): %v\n%s", err, out)
	}
	checkDashboardResults(t, promtool, d)

	// Grafana's own schema, panel options and Prometheus queries included
	// (each target names its datasource type: the schema picks the query's
	// kind by it).
	path, err := filepath.Abs(filepath.Join("..", "..", "build", "dashboards", "servicegroup.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testmonitoring.DashboardCheck(t), path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard against Grafana's schema (hack/grafana-dashboard-check): %v\n%s", err, out)
	}
}

// dashboardTest is build/dashboards/servicegroup-test.yaml: input series in
// promtool's notation and, per panel query, the samples it must return.
// Read with a YAML library that keeps scalars as written: sigs.k8s.io/yaml
// would turn the series notation "0x20" into the number 32, as JSON does.
type dashboardTest struct {
	Interval    string `yaml:"interval"`
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	Panels []struct {
		Panel      int    `yaml:"panel"`
		RefID      string `yaml:"refId"`
		EvalTime   string `yaml:"eval_time"`
		ExpSamples []struct {
			Labels string  `yaml:"labels"`
			Value  float64 `yaml:"value"`
		} `yaml:"exp_samples"`
	} `yaml:"panels"`
}

func readDashboardTest(t *testing.T) dashboardTest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "build", "dashboards", "servicegroup-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var dt dashboardTest
	if err := dec.Decode(&dt); err != nil {
		t.Fatalf("build/dashboards/servicegroup-test.yaml: %v", err)
	}
	return dt
}

// checkDashboardResults runs every panel query of d through promtool test
// rules with servicegroup-test.yaml's series and expected samples; a query
// without an expectation, or an expectation for no query, fails.
func checkDashboardResults(t *testing.T, promtool string, d grafanaDashboard) {
	t.Helper()
	dt := readDashboardTest(t)
	exprs := map[string]string{}
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			exprs[fmt.Sprintf("%d/%s", p.ID, q.RefID)] = q.Expr
		}
	}
	expected := map[string]bool{}
	var exprTests []map[string]any
	for _, e := range dt.Panels {
		key := fmt.Sprintf("%d/%s", e.Panel, e.RefID)
		expr, ok := exprs[key]
		if !ok {
			t.Errorf("servicegroup-test.yaml expects results of panel %s, which the dashboard does not have", key)
			continue
		}
		expected[key] = true
		exprTests = append(exprTests, map[string]any{"expr": expr, "eval_time": e.EvalTime, "exp_samples": e.ExpSamples})
	}
	for key, expr := range exprs {
		if !expected[key] {
			t.Errorf("dashboard panel %s (%s) has no expected result in servicegroup-test.yaml", key, expr)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-test.yaml")
	data, err := yamlv3.Marshal(map[string]any{"tests": []any{map[string]any{
		"name": "dashboard queries", "interval": dt.Interval, "input_series": dt.InputSeries, "promql_expr_test": exprTests,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("dashboard queries on series shaped like ours (promtool test rules): %v\n%s", err, out)
	}
}
