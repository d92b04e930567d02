package wrapper

import "testing"

// TestSyncQueueMetricsServed: the sync queue's workqueue_* metrics are in
// what /metrics serves (client-go's provider keeps them outside Registry),
// and gathering both together does not collide.
func TestSyncQueueMetricsServed(t *testing.T) {
	s := newSyncer("node0", emptyCaches(), benchStores())
	defer s.queue.ShutDown()
	s.queue.Add(syncKey{namespace: "ns", name: "svc"})
	families, err := Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "application-grid-wrapper" && m.GetCounter().GetValue() >= 1 {
					return
				}
			}
		}
	}
	t.Fatal(`workqueue_adds_total{name="application-grid-wrapper"} not served`)
}
