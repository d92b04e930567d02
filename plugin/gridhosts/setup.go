package gridhosts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/internal/snapshottrust"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/informers"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

// maxTTL keeps answers about moving pods from living too long in caches.
const maxTTL = 3600

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	g, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	routeKlog()
	cfg, err := g.restConfig()
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	var services *rest.Config
	if g.ServicesConfig != nil {
		if services, err = g.ServicesConfig.ClientConfig(); err != nil {
			return plugin.Error(pluginName, fmt.Errorf("services_kubeconfig: %w", err))
		}
	}
	if err := g.watch(cfg, services); err != nil {
		return plugin.Error(pluginName, err)
	}

	// Informers live from OnStartup to OnShutdown: a reload builds a new
	// instance and shuts this one down.
	c.OnStartup(g.start)
	c.OnShutdown(g.stop)

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		g.Next = next
		return g
	})
	return nil
}

// start runs the informers. CoreDNS runs the start-up hooks one after the
// other before it serves, so start waits for the first sync only while it
// can come soon (see waitStartup): an unreachable or refusing apiserver
// must not add to the kubernetes plugin's own start-up wait. Until every
// source is known, Ready is false and ServeDNS hands every name it cannot
// decide to the next plugin (see beforeSync).
//
// With a snapshot configured, it is read first; if the informers are not
// known when start returns, names are answered from it (see snapshot.go)
// until they are.
func (g *GridHosts) start() error {
	logger := klog.Background().WithName(pluginName)
	var (
		saved     *index.Index
		savedBody *snapshot.Body
		header    snapshot.Header
	)
	if g.snapshot != nil {
		saved, savedBody, header = g.loadSnapshot(logger)
	}
	// Decided before the informers start, so the decision does not
	// depend on how fast they sync.
	if saved != nil {
		if v := g.trustSnapshot(context.Background(), header, savedBody); !v.Serve {
			g.refuseSnapshot(logger, v)
			saved = nil
		}
	}
	live := make(chan struct{})
	g.gridsKnown, g.servicesKnown = g.watcher.GridsKnown, g.watcher.ServicesKnown
	g.watcher.OnError(g.onUpstreamError)
	g.watcher.Start(logger, func() {
		replaced := g.goLive()
		logger.Info("Serving grid names: informers synced", "replacedSnapshot", replaced)
		close(live)
		// What the initial lists decoded is garbage once the index holds the
		// small forms, but the heap it grew stays resident: the runtime
		// returns free memory only down to its next collection goal (twice
		// the live heap). Return it once, after the first sync.
		debug.FreeOSMemory()
	})
	g.watcher.WaitStartup(informers.StartupBound)
	if g.watcher.Known() {
		g.goLive() // don't leave the first queries to the poll's next tick
	}
	if saved != nil {
		g.serveSnapshot(logger, saved, header)
	}
	if g.snapshot != nil {
		g.snapshot.Stamp.Probe = g.watcher.Probe
		if g.Node != "" {
			g.snapshot.Identify = g.identify
		}
		ctx, cancel := context.WithCancel(context.Background())
		g.snapCancel, g.snapDone = cancel, make(chan struct{})
		go func() {
			defer close(g.snapDone)
			g.runSnapshots(ctx, live)
		}()
	}
	return nil
}

// stop ends the informers and, with a snapshot configured, writes the last
// live state once more (never a snapshot still being served, nor a partial
// index).
func (g *GridHosts) stop() error {
	if g.snapCancel != nil {
		g.snapCancel()
		<-g.snapDone
	}
	g.watcher.Stop()
	if g.snapshot != nil && g.synced.Load() {
		g.snapshot.Write(g.index, true)
	}
	return nil
}

// nodeMode: one node's view (`node NAME` without `clients`), which reads
// grids from their children and places no client.
func (g *GridHosts) nodeMode() bool { return !g.Clients && g.Node != "" }

// watch makes the index of g's mode and the informers that will feed it
// from cfg (Services and EndpointSlices from services when it is not nil),
// not started.
func (g *GridHosts) watch(cfg, services *rest.Config) error {
	g.index = index.New(index.Options{
		NodeMode:     g.nodeMode(),
		ObserveEvent: func(d time.Duration) { eventToAnswerable.Observe(d.Seconds()) },
		ObserveWrite: func(d time.Duration) { writeToAnswerable.Observe(d.Seconds()) },
	})
	w, err := informers.New(cfg, services, g.index, g.Clients, g.Node)
	if err != nil {
		return err
	}
	g.watcher = w
	return nil
}

func (g *GridHosts) restConfig() (*rest.Config, error) {
	if g.ClientConfig == nil {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := g.ClientConfig.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// parseSnapshot reads the arguments of `snapshot PATH [INTERVAL]`.
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
	interval := defaultSnapshotInterval
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		if err != nil || d < minSnapshotInterval || d > maxSnapshotInterval {
			return "", 0, fmt.Errorf("snapshot: interval must be a duration from %v to %v (e.g. 1m), not '%s'", minSnapshotInterval, maxSnapshotInterval, args[1])
		}
		interval = d
	}
	return filepath.Clean(path), interval, nil
}

// parse reads one gridhosts block:
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
func parse(c *caddy.Controller) (*GridHosts, error) {
	var g *GridHosts
	for c.Next() {
		if g != nil {
			return nil, plugin.ErrOnce
		}
		g = New(plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys))
		for _, z := range g.Zones {
			if dnsutil.IsReverse(z) > 0 {
				return nil, fmt.Errorf("reverse zone %q: gridhosts answers forward names only", z)
			}
		}
		seen := map[string]bool{}
		var snapPath string
		snapInterval, snapMaxAge := defaultSnapshotInterval, snapshottrust.DefaultMaxAge
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
				overrides := &clientcmd.ConfigOverrides{}
				if len(args) == 2 {
					overrides.CurrentContext = args[1]
				}
				cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
					&clientcmd.ClientConfigLoadingRules{ExplicitPath: args[0]}, overrides)
				if prop == "kubeconfig" {
					g.ClientConfig = cc
				} else {
					g.ServicesConfig = cc
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
				g.Node = args[0]
			case "clients":
				if len(c.RemainingArgs()) != 0 {
					return nil, c.ArgErr()
				}
				g.Clients = true
			case "ttl":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				t, err := strconv.Atoi(args[0])
				if err != nil || t < 0 || t > maxTTL {
					return nil, c.Errf("ttl must be a number of seconds from 0 to %d, not '%s'", maxTTL, args[0])
				}
				g.TTL = uint32(t) // 0..maxTTL, checked above
			case "require_node_restricted_keys":
				if len(c.RemainingArgs()) != 0 {
					return nil, c.ArgErr()
				}
				g.RestrictKeys = true
			case "fallthrough":
				g.Fall.SetZonesFromArgs(c.RemainingArgs())
			case "snapshot":
				var err error
				if snapPath, snapInterval, err = parseSnapshot(c.RemainingArgs()); err != nil {
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
				snapMaxAge = d
			default:
				return nil, c.Errf("unknown property '%s'", prop)
			}
		}
		if snapPath == "" && seen["snapshot_max_age"] {
			return nil, c.Err("snapshot_max_age without snapshot")
		}
		if snapPath != "" {
			g.snapshot = snapshot.NewWriter(snapPath, snapInterval, snapshot.Owner{Node: g.Node, Clients: g.Clients, Zones: g.Zones})
			g.snapshot.Life.MaxAge = snapMaxAge
		}
	}
	if g == nil {
		return nil, errors.New("no gridhosts block")
	}
	if g.Node == "" && !g.Clients {
		return nil, errors.New("one of 'node NAME' or 'clients' is required")
	}
	return g, nil
}
