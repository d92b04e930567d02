package gridhosts

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// maxTTL keeps answers about moving pods from living too long in caches.
const maxTTL = 3600

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	g, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	cfg, err := g.restConfig()
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	w, err := newWatcher(cfg, g.index, g.Clients)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	g.watcher = w
	g.index.observe = func(d time.Duration) { eventToAnswerable.Observe(d.Seconds()) }
	g.index.observeWrite = func(d time.Duration) { writeToAnswerable.Observe(d.Seconds()) }

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
func (g *GridHosts) start() error {
	logger := klog.Background().WithName(pluginName)
	g.gridsKnown, g.servicesKnown = g.watcher.gridSource.known, g.watcher.serviceSource.known
	g.watcher.start(func() {
		g.synced.Store(true)
		logger.Info("Serving grid names: informers synced")
	})
	g.watcher.waitStartup(startupBound)
	if g.watcher.sources.known() {
		g.synced.Store(true) // don't leave the first queries to the poll's next tick
	}
	return nil
}

func (g *GridHosts) stop() error {
	g.watcher.stop()
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

// parse reads one gridhosts block:
//
//	gridhosts [ZONES...] {
//	    kubeconfig PATH [CONTEXT]
//	    node NAME | clients
//	    ttl SECONDS
//	    fallthrough [ZONES...]
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
		for c.NextBlock() {
			prop := c.Val()
			switch prop {
			case "kubeconfig", "node", "clients", "ttl", "fallthrough":
				if seen[prop] {
					return nil, c.Errf("'%s' given twice", prop)
				}
				seen[prop] = true
			}
			switch prop {
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 && len(args) != 2 {
					return nil, c.ArgErr()
				}
				overrides := &clientcmd.ConfigOverrides{}
				if len(args) == 2 {
					overrides.CurrentContext = args[1]
				}
				g.ClientConfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
					&clientcmd.ClientConfigLoadingRules{ExplicitPath: args[0]}, overrides)
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
			case "fallthrough":
				g.Fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return nil, c.Errf("unknown property '%s'", prop)
			}
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
