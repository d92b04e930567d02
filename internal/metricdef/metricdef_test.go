package metricdef

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestFactoryNamesRegistersAndKeepsOptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := With(reg, "ns", "sub")
	m.Counter("c_total", "a counter").Inc()
	m.CounterVec("cv_total", "a counter vec", "a", "b").WithLabelValues("1", "2").Inc()
	m.Gauge("g", "a gauge").Set(1)
	m.GaugeVec("gv", "a gauge vec", "a").WithLabelValues("1").Set(1)
	m.GaugeFunc("gf", "a gauge func", func() float64 { return 7 })
	m.Histogram("h_seconds", "a histogram", []float64{1, 2}).Observe(1)
	m.HistogramVec("hv_seconds", "a histogram vec", []float64{1, 2, 3}, "a").WithLabelValues("1").Observe(1)
	bare := With(reg, "", "workqueue")
	bare.Gauge("depth", "no namespace").Set(0)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type family struct {
		help    string
		typ     dto.MetricType
		labels  []string
		buckets int
	}
	got := map[string]family{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName())
		}
		got[mf.GetName()] = family{mf.GetHelp(), mf.GetType(), labels, len(m.GetHistogram().GetBucket())}
	}
	want := map[string]family{
		"ns_sub_c_total":    {"a counter", dto.MetricType_COUNTER, nil, 0},
		"ns_sub_cv_total":   {"a counter vec", dto.MetricType_COUNTER, []string{"a", "b"}, 0},
		"ns_sub_g":          {"a gauge", dto.MetricType_GAUGE, nil, 0},
		"ns_sub_gv":         {"a gauge vec", dto.MetricType_GAUGE, []string{"a"}, 0},
		"ns_sub_gf":         {"a gauge func", dto.MetricType_GAUGE, nil, 0},
		"ns_sub_h_seconds":  {"a histogram", dto.MetricType_HISTOGRAM, nil, 2},
		"ns_sub_hv_seconds": {"a histogram vec", dto.MetricType_HISTOGRAM, []string{"a"}, 3},
		"workqueue_depth":   {"no namespace", dto.MetricType_GAUGE, nil, 0},
	}
	if len(got) != len(want) {
		t.Errorf("registered %d families, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s not registered", name)
			continue
		}
		if g.help != w.help || g.typ != w.typ || !slices.Equal(g.labels, w.labels) || g.buckets != w.buckets {
			t.Errorf("%s = %+v, want %+v", name, g, w)
		}
	}
}
