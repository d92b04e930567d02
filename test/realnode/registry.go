package realnode

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is the test's container registry: go-containerregistry's
// registry, blobs on disk, plain HTTP on the fabric's root address, where
// every node's containerd pulls from (an edge site's local mirror).
type Registry struct {
	// Addr is host:port.
	Addr    string
	server  *http.Server
	handler http.Handler
	running bool
}

// StartRegistry serves a registry on ip (port chosen by the kernel) with
// its blobs under dir.
func StartRegistry(ip net.IP, dir string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &Registry{Addr: net.JoinHostPort(ip.String(), "0"), handler: registry.New(
		registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)),
	)}
	return r, r.serve()
}

// Restart serves again after Close, on the same address and with what was
// pushed (the handler keeps the manifests in memory, the blobs on disk).
func (r *Registry) Restart() error { return r.serve() }

// serve serves on r.Addr unless it already does.
func (r *Registry) serve() error {
	if r.running {
		return nil
	}
	l, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return err
	}
	r.running = true
	r.Addr = l.Addr().String()
	r.server = &http.Server{Handler: r.handler, ReadHeaderTimeout: 30 * time.Second}
	go func(srv *http.Server) {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("registry: %v", err)
		}
	}(r.server)
	return nil
}

// Close stops the registry.
func (r *Registry) Close() {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.server.Shutdown(ctx)
	r.running = false
}
