package harness

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/test/controlplane"
)

// KubeProxyRelease is one kube-proxy build the version matrix runs.
type KubeProxyRelease struct {
	// Version is the k8s.io/kubernetes release it was built from.
	Version string
	// Binary is its path.
	Binary string
}

// kubeProxyVersionsFile lists the older releases, for hack/kube-proxy-bins.sh
// and for KubeProxyReleases.
const kubeProxyVersionsFile = "hack/kube-proxy-versions.txt"

// KubeProxyReleases returns the control plane's own kube-proxy followed by
// each release in hack/kube-proxy-versions.txt, built by
// hack/kube-proxy-bins.sh into its cache. When one is missing and either
// build is wanted (CI) or a build is already under way (`make test` starts
// one in the background), it runs the script, which waits for that build or
// does it, within ctx. Otherwise the error names what is missing and how to
// build it.
func KubeProxyReleases(ctx context.Context) ([]KubeProxyRelease, error) {
	current, err := controlplane.Binary(controlplane.KubeProxy)
	if err != nil {
		return nil, err
	}
	out := []KubeProxyRelease{{Version: controlplane.KubernetesVersion, Binary: current}}
	versions, err := olderKubeProxyVersions()
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, v := range versions {
		if _, err := os.Stat(kubeProxyBinary(v)); err != nil {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 && (os.Getenv("CI") != "" || kubeProxyBuildUnderWay()) {
		if err := buildKubeProxyReleases(ctx, missing); err != nil {
			return nil, err
		}
	}
	for _, v := range versions {
		bin := kubeProxyBinary(v)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("kube-proxy %s not found in %s: run 'make kube-proxy-bins' (hack/kube-proxy-bins.sh)", v, filepath.Dir(bin))
		}
		out = append(out, KubeProxyRelease{Version: v, Binary: bin})
	}
	return out, nil
}

func kubeProxyBinary(version string) string {
	return filepath.Join(kubeProxyCacheDir(version), "kube-proxy")
}

// kubeProxyBuildUnderWay tells whether hack/kube-proxy-bins.sh holds its lock.
func kubeProxyBuildUnderWay() bool {
	f, err := os.Open(filepath.Join(controlplane.CacheRoot(), "kube-proxy-bins.lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// buildKubeProxyReleases runs hack/kube-proxy-bins.sh for versions; the
// script's lock makes it wait for a build already under way.
func buildKubeProxyReleases(ctx context.Context, versions []string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kube-proxy-bins.sh"), versions...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/kube-proxy-bins.sh %s: %w\n%s", strings.Join(versions, " "), err, out)
	}
	klog.InfoS("Older kube-proxy releases ready", "versions", versions, "waited", time.Since(start).Round(time.Second))
	return nil
}

func olderKubeProxyVersions() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, kubeProxyVersionsFile))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// kubeProxyCacheDir is where hack/kube-proxy-bins.sh puts a release:
// $SERVICEGROUP_CACHE/kube-proxy-<release>-<go version>/bin (the same cache
// root as hack/k8s-bins.sh; the go version of the test binary is the one the
// script builds with).
func kubeProxyCacheDir(version string) string {
	return filepath.Join(controlplane.CacheRoot(), fmt.Sprintf("kube-proxy-%s-%s", version, runtime.Version()), "bin")
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
