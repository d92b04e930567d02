// Package config reads a gridhosts block of a Corefile into a Config, with a
// message for every bad line. It is apart from the plugin's setup so that
// what reads untrusted text can be fuzzed without building client-go and the
// rest of CoreDNS: the plugin builds its handler from the Config.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultTTL matches the kubernetes plugin: pod addresses change.
const DefaultTTL = 5

// maxTTL keeps answers about moving pods from living too long in caches.
const maxTTL = 3600

// The bounds of `snapshot PATH INTERVAL`.
const (
	minSnapshotInterval = time.Second
	maxSnapshotInterval = 24 * time.Hour
)

// Config is what one gridhosts block asks for; the plugin's setup builds
// its handler from it. Parse returns one with node or clients set.
type Config struct {
	// Zones are the block's zones, or the server block's, normalised by
	// CoreDNS (plugin.OriginsFromArgsOrServerBlock).
	Zones []string
	Fall  fall.F
	TTL   uint32
	// Node is `node NAME`; Clients is `clients`.
	Node    string
	Clients bool
	// RestrictKeys is `require_node_restricted_keys`.
	RestrictKeys bool

	// Kubeconfig reaches the apiserver; nil means in-cluster.
	Kubeconfig *Kubeconfig
	// ServicesKubeconfig, when set, is where Services and EndpointSlices
	// are read instead (the node wrapper's DNS view).
	ServicesKubeconfig *Kubeconfig

	// Snapshot is nil when the block keeps none.
	Snapshot *Snapshot
}

// Kubeconfig is `kubeconfig PATH [CONTEXT]` as written: the file is read
// when the plugin starts, not here.
type Kubeconfig struct {
	Path    string
	Context string // "" for the file's current context
}

// Snapshot is `snapshot PATH [INTERVAL]` and `snapshot_max_age DURATION`.
// What is not given is left unset, not defaulted: the defaults are package
// snapshottrust's, shared with the wrapper, which this package does not
// import to stay small.
type Snapshot struct {
	// Path is absolute and clean.
	Path string
	// Interval is 0 when not given.
	Interval time.Duration
	// MaxAge is nil when not given; 0 means any age.
	MaxAge *time.Duration
}

// Parse reads one gridhosts block:
//
//	gridhosts [ZONES...] {
//	    kubeconfig PATH [CONTEXT]
//	    services_kubeconfig PATH [CONTEXT]
//	    node NAME | clients
//	    ttl SECONDS
//	    fallthrough [ZONES...]
//	    snapshot PATH [INTERVAL]
//	    snapshot_max_age DURATION
//	    require_node_restricted_keys
//	}
func Parse(c *caddy.Controller) (*Config, error) {
	var cfg *Config
	for c.Next() {
		if cfg != nil {
			return nil, plugin.ErrOnce
		}
		cfg = &Config{Zones: plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys), TTL: DefaultTTL}
		for _, z := range cfg.Zones {
			if dnsutil.IsReverse(z) > 0 {
				return nil, fmt.Errorf("reverse zone %q: gridhosts answers forward names only", z)
			}
		}
		seen := map[string]bool{}
		var snap Snapshot
		for c.NextBlock() {
			prop := c.Val()
			switch prop {
			case "kubeconfig", "services_kubeconfig", "node", "clients", "ttl", "fallthrough", "snapshot", "snapshot_max_age", "require_node_restricted_keys":
				if seen[prop] {
					return nil, c.Errf("'%s' given twice", prop)
				}
				seen[prop] = true
			}
			switch prop {
			case "kubeconfig", "services_kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 && len(args) != 2 {
					return nil, c.ArgErr()
				}
				k := &Kubeconfig{Path: args[0]}
				if len(args) == 2 {
					k.Context = args[1]
				}
				if prop == "kubeconfig" {
					cfg.Kubeconfig = k
				} else {
					cfg.ServicesKubeconfig = k
				}
			case "node":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if args[0] == "" {
					return nil, c.Err("node: empty name (is the environment variable in {$...} set?)")
				}
				if errs := validation.IsDNS1123Subdomain(args[0]); len(errs) > 0 {
					return nil, c.Errf("node: invalid name '%s': %s", args[0], errs[0])
				}
				cfg.Node = args[0]
			case "clients":
				if len(c.RemainingArgs()) != 0 {
					return nil, c.ArgErr()
				}
				cfg.Clients = true
			case "ttl":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				t, err := strconv.Atoi(args[0])
				if err != nil || t < 0 || t > maxTTL {
					return nil, c.Errf("ttl must be a number of seconds from 0 to %d, not '%s'", maxTTL, args[0])
				}
				cfg.TTL = uint32(t) // 0..maxTTL, checked above
			case "require_node_restricted_keys":
				if len(c.RemainingArgs()) != 0 {
					return nil, c.ArgErr()
				}
				cfg.RestrictKeys = true
			case "fallthrough":
				cfg.Fall.SetZonesFromArgs(c.RemainingArgs())
			case "snapshot":
				var err error
				if snap.Path, snap.Interval, err = parseSnapshot(c.RemainingArgs()); err != nil {
					return nil, c.Errf("%v", err)
				}
			case "snapshot_max_age":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				d, err := time.ParseDuration(args[0])
				if err != nil || d < 0 {
					return nil, c.Errf("snapshot_max_age must be a duration, 0 for any age (e.g. 168h), not '%s'", args[0])
				}
				snap.MaxAge = &d
			default:
				return nil, c.Errf("unknown property '%s'", prop)
			}
		}
		if snap.Path == "" && seen["snapshot_max_age"] {
			return nil, c.Err("snapshot_max_age without snapshot")
		}
		if snap.Path != "" {
			cfg.Snapshot = &snap
		}
	}
	if cfg == nil {
		return nil, errors.New("no gridhosts block")
	}
	if cfg.Node == "" && !cfg.Clients {
		return nil, errors.New("one of 'node NAME' or 'clients' is required")
	}
	return cfg, nil
}

// parseSnapshot reads the arguments of `snapshot PATH [INTERVAL]`; the
// interval is 0 when not given.
func parseSnapshot(args []string) (string, time.Duration, error) {
	if len(args) != 1 && len(args) != 2 {
		return "", 0, errors.New("snapshot: want PATH [INTERVAL]")
	}
	path := args[0]
	switch {
	case path == "":
		return "", 0, errors.New("snapshot: empty path")
	case !filepath.IsAbs(path):
		return "", 0, fmt.Errorf("snapshot: path '%s' is not absolute", path)
	case strings.HasSuffix(path, "/") || filepath.Base(path) == "." || filepath.Base(path) == "..":
		return "", 0, fmt.Errorf("snapshot: path '%s' names a directory, not a file", path)
	}
	var interval time.Duration
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d < minSnapshotInterval || d > maxSnapshotInterval {
			return "", 0, fmt.Errorf("snapshot: interval must be a duration from %v to %v (e.g. 1m), not '%s'", minSnapshotInterval, maxSnapshotInterval, args[1])
		}
		interval = d
	}
	return filepath.Clean(path), interval, nil
}
