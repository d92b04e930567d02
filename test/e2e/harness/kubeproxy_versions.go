package harness

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// KubeProxyRelease is one kube-proxy build the version matrix runs: the
// k8s.io/kubernetes release it was built from and its path.
type KubeProxyRelease = controlplane.OlderRelease

// KubeProxyReleases returns the control plane's own kube-proxy followed by
// each release in hack/kube-proxy-versions.txt, built by
// hack/kube-proxy-bins.sh into its cache (see controlplane.OlderReleases:
// built when CI asks or a build is under way, else the error says how).
func KubeProxyReleases(ctx context.Context) ([]KubeProxyRelease, error) {
	current, err := controlplane.Binary(controlplane.KubeProxy)
	if err != nil {
		return nil, err
	}
	older, err := controlplane.OlderReleases(ctx, "kube-proxy", controlplane.KubeProxy)
	if err != nil {
		return nil, err
	}
	return append([]KubeProxyRelease{{Version: controlplane.KubernetesVersion, Binary: current}}, older...), nil
}

// BuiltVersion reads which k8s.io/kubernetes release a binary was built from,
// out of the module information the Go linker embeds: the binary's own word,
// whatever its version flags say.
func BuiltVersion(binary string) (string, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", err
	}
	// The module of the main package (cmd/kube-proxy) is k8s.io/kubernetes.
	for _, dep := range append([]*debug.Module{&info.Main}, info.Deps...) {
		if dep.Path == "k8s.io/kubernetes" {
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("%s: no k8s.io/kubernetes in its build information", binary)
}

// KubeProxyMetrics scrapes the node's kube-proxy /metrics.
func (n *FabricNode) KubeProxyMetrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: n.NS.DialContext}}
	return scrape(ctx, client, "http://"+kubeProxyMetrics+"/metrics")
}

// WrapperMetrics scrapes the node's wrapper /metrics.
func (n *FabricNode) WrapperMetrics(ctx context.Context) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: n.NS.DialContext}}
	return scrape(ctx, client, "http://"+WrapperOpsAddr+"/metrics")
}

func scrape(ctx context.Context, client *http.Client, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// Sample is one series of a scraped metric.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics are the samples of one scrape, in its order.
type Metrics []Sample

// ParseMetrics reads the Prometheus text format: enough of it for the
// counters and gauges the tests read (no escapes inside label values beyond
// \" and \\, which these exporters' labels do not use anyway).
func ParseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.Name = line[:i]
			end := strings.LastIndex(line, "}")
			if end < i {
				return nil, fmt.Errorf("unterminated labels: %q", line)
			}
			if err := parseLabels(line[i+1:end], s.Labels); err != nil {
				return nil, fmt.Errorf("%w: %q", err, line)
			}
			rest = line[end+1:]
		} else if i >= 0 {
			s.Name, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("no value: %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLabels(s string, into map[string]string) error {
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimLeft(strings.TrimSpace(s), ",") {
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return fmt.Errorf("bad label pair %q", s)
		}
		var val strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		if i >= len(rest) {
			return fmt.Errorf("unterminated label value %q", s)
		}
		into[strings.TrimSpace(name)] = val.String()
		s = rest[i+1:]
	}
	return nil
}

// Sum adds the values of name's series that carry every label in match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	sum := 0.0
	for _, s := range m.Select(name, match) {
		sum += s.Value
	}
	return sum
}

// Select returns name's series that carry every label in match.
func (m Metrics) Select(name string, match map[string]string) []Sample {
	var out []Sample
next:
	for _, s := range m {
		if s.Name != name {
			continue
		}
		for k, v := range match {
			if s.Labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// KlogErrors returns the entries of a klog text log at error level or worse
// (E or F header), each with its continuation lines (a multi-line value such
// as err=<...> follows its header on lines that carry no header).
func KlogErrors(log string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(log, "\n") {
		header := len(line) > 5 && strings.ContainsRune("IWEF", rune(line[0])) && isDigits(line[1:5])
		switch {
		case header && (line[0] == 'E' || line[0] == 'F'):
			out = append(out, line)
			in = true
		case header:
			in = false
		case in && line != "":
			out[len(out)-1] += "\n" + line
		}
	}
	return out
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
