package metricdef

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // client-go's workqueue metrics
)

// WorkqueueFamilies gathers the workqueue_* metrics of every client-go
// workqueue in the process. component-base's provider (imported above)
// installs itself as client-go's global provider when the program starts
// and registers in the legacy registry, which a component serves beside
// its own: only these families are taken from it, since its Go collector
// would collide with the component's.
var WorkqueueFamilies prometheus.Gatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
		return !strings.HasPrefix(mf.GetName(), "workqueue_")
	}), err
})
