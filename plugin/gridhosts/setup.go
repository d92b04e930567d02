package gridhosts

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/plugin/gridhosts/config"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/index"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/informers"
	"github.com/servicegroup/servicegroup/plugin/gridhosts/snapshot"
)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	block, err := config.Parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	g := fromConfig(block)
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

// fromConfig builds the GridHosts a parsed block asks for, watching
// nothing yet, with the defaults package config leaves to the plugin.
func fromConfig(cfg *config.Config) *GridHosts {
	g := New(cfg.Zones)
	g.Fall, g.TTL = cfg.Fall, cfg.TTL
	g.Node, g.Clients, g.RestrictKeys = cfg.Node, cfg.Clients, cfg.RestrictKeys
	if cfg.Kubeconfig != nil {
		g.ClientConfig = clientConfig(cfg.Kubeconfig)
	}
	if cfg.ServicesKubeconfig != nil {
		g.ServicesConfig = clientConfig(cfg.ServicesKubeconfig)
	}
	if s := cfg.Snapshot; s != nil {
		// Unset, the interval and maximum age are the wrapper's too
		// (package snapshottrust's; NewWriter's maximum age).
		g.snapshot = snapshot.NewWriter(s.Path, cmp.Or(s.Interval, defaultSnapshotInterval), snapshot.Owner{Node: g.Node, Clients: g.Clients, Zones: g.Zones})
		if s.MaxAge != nil {
			g.snapshot.Life.MaxAge = *s.MaxAge
		}
	}
	return g
}

// clientConfig reads k's file when the client is made, not now.
func clientConfig(k *config.Kubeconfig) clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: k.Path},
		&clientcmd.ConfigOverrides{CurrentContext: k.Context})
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
