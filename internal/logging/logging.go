// Package logging gives our commands the logging flags of Kubernetes'
// components (--logging-format text|json, -v, --vmodule, --log-flush-frequency)
// from k8s.io/component-base, so an operator configures and collects our logs
// exactly as kube-apiserver's and the kubelet's.
package logging

import (
	"flag"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
)

func init() {
	// A command's run function may be called more than once in one process
	// (its tests do): the same configuration applied again is not an error.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
}

// Options is the logging configuration read from the flags.
type Options struct{ config *logsapi.LoggingConfiguration }

// AddFlags registers the logging flags on fs; call Apply once fs is parsed.
func AddFlags(fs *flag.FlagSet) *Options {
	c := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(c, fs)
	return &Options{config: c}
}

// Validate checks the flags' values without applying them; each error
// names its flag.
func (o *Options) Validate() field.ErrorList {
	errs := logsapi.Validate(o.config, nil, nil)
	for _, e := range errs {
		i := strings.IndexAny(e.Field, ".[")
		if i < 0 {
			i = len(e.Field)
		}
		if name, ok := flagOfField[e.Field[:i]]; ok {
			e.Field = name + e.Field[i:]
		}
	}
	return errs
}

// flagOfField names the flag of each field component-base validates.
var flagOfField = map[string]string{
	"format":         "--logging-format",
	"flushFrequency": "--log-flush-frequency",
	"verbosity":      "-v",
	"vmodule":        "--vmodule",
}

// Apply validates the flags' values and sets up klog with them: a bad format
// or verbosity is an error naming the flag.
func (o *Options) Apply() error {
	return logsapi.ValidateAndApply(o.config, nil)
}
