// Command grafana-dashboard-check decodes Grafana dashboard JSON files with
// Grafana's own schema, as generated into grafana-foundation-sdk from
// Grafana's dashboard, panel and datasource-query kinds: strictly (an
// unknown field, a wrong type or a missing required field fails), panel
// options and queries by their panel and datasource types, then validated.
// A module of its own so the SDK never reaches the main module;
// hack/grafana-dashboard-check.sh builds it for the tests.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grafana-dashboard-check DASHBOARD.json...")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func check(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(data); failed(err) {
		return fmt.Errorf("against Grafana's dashboard schema:\n%w", err)
	}
	if err := d.Validate(); failed(err) {
		return fmt.Errorf("Grafana's dashboard constraints:\n%w", err)
	}
	return nil
}

// failed: the SDK returns its error list as an error even when it is empty.
func failed(err error) bool {
	var list cog.BuildErrors
	if errors.As(err, &list) {
		return len(list) > 0
	}
	return err != nil
}
