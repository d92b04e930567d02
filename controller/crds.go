package controller

import (
	"context"
	"fmt"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/servicegroup/servicegroup/build/crds"
)

// crdEstablishTimeout bounds the wait for freshly applied CRDs.
const crdEstablishTimeout = time.Minute

// EnsureCRDs applies the embedded CRDs and waits until they are Established.
func EnsureCRDs(ctx context.Context, client apiextensionsclient.Interface) error {
	if err := crds.Apply(ctx, client); err != nil {
		return err
	}
	crdApplies.Inc()
	return crds.WaitEstablished(ctx, client, crdEstablishTimeout)
}

// CRDsDrifted reports which embedded CRDs are missing or differ from the
// cluster's copy (crds.Drifted).
func CRDsDrifted(ctx context.Context, client apiextensionsclient.Interface) ([]string, error) {
	return crds.Drifted(ctx, client)
}

// keepCRDs re-checks the CRDs every interval and re-applies them only when
// they drifted (edited, deleted, or an older version installed).
func keepCRDs(ctx context.Context, client apiextensionsclient.Interface, interval time.Duration) {
	logger := klog.FromContext(ctx)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		drifted, err := CRDsDrifted(ctx, client)
		if err != nil {
			logger.Error(err, "Checking CRDs")
			return
		}
		if len(drifted) == 0 {
			return
		}
		logger.Info("CRDs drifted from the embedded manifests; re-applying", "crds", drifted)
		if err := EnsureCRDs(ctx, client); err != nil {
			logger.Error(fmt.Errorf("re-apply CRDs: %w", err), "Keeping CRDs")
		}
	}, interval)
}
