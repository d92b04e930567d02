package gridhosts

import (
	"fmt"
	"slices"
	"strings"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// routeKlog sends klog's lines (ours and client-go's) through CoreDNS's log
// package, so they carry CoreDNS's level prefixes and follow -log-format json
// like every other line. The kubernetes plugin does the same for itself when
// it is in the Corefile; this covers a Corefile without it.
func routeKlog() {
	klog.SetLogger(logr.New(&klogSink{p: clog.NewWithPlugin(pluginName)}))
}

// klogSink is a logr.LogSink writing to a CoreDNS plugin logger. klog checks
// -v before it calls the sink, so every call is written.
type klogSink struct {
	p      clog.P
	values []any // key/value pairs from WithValues, always even-length
}

func (s *klogSink) Init(logr.RuntimeInfo)        {}
func (s *klogSink) Enabled(int) bool             { return true }
func (s *klogSink) WithName(string) logr.LogSink { return s }

func (s *klogSink) Info(_ int, msg string, kv ...any) { s.p.Info(s.render(msg, nil, kv)) }

func (s *klogSink) Error(err error, msg string, kv ...any) { s.p.Error(s.render(msg, err, kv)) }

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	if len(kv) == 0 {
		return s
	}
	c := *s
	c.values = append(slices.Clip(s.values), kv...)
	if len(c.values)%2 != 0 {
		c.values = append(c.values, "(MISSING)")
	}
	return &c
}

// render writes msg, the error and the key/value pairs the way klog's text
// format does (key="value"), since client-go puts the resource and the
// reason in them.
func (s *klogSink) render(msg string, err error, kv []any) string {
	var b strings.Builder
	b.WriteString(msg)
	if err != nil {
		fmt.Fprintf(&b, " err=%q", err.Error())
	}
	all := append(slices.Clip(s.values), kv...)
	for i := 0; i < len(all); i += 2 {
		var v any = "(MISSING)"
		if i+1 < len(all) {
			v = all[i+1]
		}
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, " %v=%q", all[i], v)
		case error:
			fmt.Fprintf(&b, " %v=%q", all[i], v.Error())
		default:
			fmt.Fprintf(&b, " %v=%v", all[i], v)
		}
	}
	return b.String()
}
