package harness

import (
	"slices"
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP rest_client_requests_total [ALPHA] Number of HTTP requests
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:51006",method="GET"} 12
rest_client_requests_total{code="201",host="127.0.0.1:51006",method="POST"} 3
kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7639e+09
kubernetes_build_info{build_date="",compiler="gc",git_version="v1.36.4",platform="linux/amd64"} 1
weird{a="x\"y,z}",b="2"} 5
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("rest_client_requests_total", nil); got != 15 {
		t.Errorf("sum of requests = %v, want 15", got)
	}
	if got := m.Sum("rest_client_requests_total", map[string]string{"method": "POST"}); got != 3 {
		t.Errorf("POST requests = %v, want 3", got)
	}
	if got := m.Sum("kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil); got != 1.7639e+09 {
		t.Errorf("last sync = %v", got)
	}
	if s := m.Select("kubernetes_build_info", nil); len(s) != 1 || s[0].Labels["git_version"] != "v1.36.4" || s[0].Labels["build_date"] != "" {
		t.Errorf("build info = %+v", s)
	}
	if s := m.Select("weird", nil); len(s) != 1 || s[0].Labels["a"] != `x"y,z}` || s[0].Labels["b"] != "2" || s[0].Value != 5 {
		t.Errorf("escaped labels = %+v", s)
	}
	if _, err := ParseMetrics(strings.NewReader("x{a=1} 2\n")); err == nil {
		t.Error("unquoted label value parsed")
	}
}

func TestKlogErrors(t *testing.T) {
	log := `I1123 18:00:00.000000   1 server.go:1] "Starting"
E1123 18:00:01.000000   1 reflector.go:2] "Failed to watch" err=<
	forbidden
 > ipFamily="IPv4"
W1123 18:00:02.000000   1 server.go:3] "Warning"
Error: not a klog line
F1123 18:00:03.000000   1 main.go:4] "Fatal"`
	want := []string{
		"E1123 18:00:01.000000   1 reflector.go:2] \"Failed to watch\" err=<\n\tforbidden\n > ipFamily=\"IPv4\"",
		`F1123 18:00:03.000000   1 main.go:4] "Fatal"`,
	}
	if got := KlogErrors(log); !slices.Equal(got, want) {
		t.Errorf("KlogErrors = %q, want %q", got, want)
	}
}
