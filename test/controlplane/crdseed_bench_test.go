package controlplane

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStartWithCRDs: what a control plane start with the CRDs costs in
// CPU when it applies them (applied) and when it finds them seeded (seeded),
// side by side. kube-apiserver's and etcd's CPU, start to stop, per start.
func BenchmarkStartWithCRDs(b *testing.B) {
	requireBinaries(b)
	for _, c := range []struct {
		name  string
		apply bool
	}{{"applied", true}, {"seeded", false}} {
		b.Run(c.name, func(b *testing.B) {
			var apiserver, etcd, wall time.Duration
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), startBound)
				began := time.Now()
				cp, err := Start(ctx, Options{CRDs: true, ApplyCRDs: c.apply})
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

// cpuOf is an ended process's user+system CPU time.
func cpuOf(p *Process) time.Duration {
	<-p.done
	st := p.cmd.ProcessState
	return st.UserTime() + st.SystemTime()
}
