package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkControlPlaneStart: what a control plane start costs in CPU when
// kube-apiserver bootstraps on an empty etcd and the CRDs are applied
// through the API (fresh), and when it starts from the seed (seeded), side
// by side, with and without the CRDs. kube-apiserver's and etcd's CPU, start
// to stop, per start, and the wall time to ready (CRDs Established).
func BenchmarkControlPlaneStart(b *testing.B) {
	requireBinaries(b)
	for _, withCRDs := range []bool{true, false} {
		for _, c := range []struct {
			name   string
			noSeed bool
		}{{"fresh", true}, {"seeded", false}} {
			b.Run(fmt.Sprintf("crds=%t/%s", withCRDs, c.name), func(b *testing.B) {
				var apiserver, etcd, wall time.Duration
				for b.Loop() {
					ctx, cancel := context.WithTimeout(context.Background(), startBound)
					began := time.Now()
					cp, err := Start(ctx, Options{CRDs: withCRDs, NoSeed: c.noSeed})
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					wall += time.Since(began)
					cp.Stop()
					apiserver += cpuOf(cp.proc(KubeAPIServer))
					etcd += cpuOf(cp.proc(Etcd))
				}
				n := float64(b.N)
				b.ReportMetric(apiserver.Seconds()/n, "apiserver-CPU-s/op")
				b.ReportMetric(etcd.Seconds()/n, "etcd-CPU-s/op")
				b.ReportMetric(wall.Seconds()/n, "ready-s/op")
			})
		}
	}
}

// cpuOf is an ended process's user+system CPU time.
func cpuOf(p *Process) time.Duration {
	<-p.done
	st := p.cmd.ProcessState
	return st.UserTime() + st.SystemTime()
}
