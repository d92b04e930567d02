package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
)

// TestManagedCRDs: with ManageCRDs the controller installs the CRDs on an
// empty cluster, finds no drift right after, and restores a CRD someone edited.
func TestManagedCRDs(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	e := newEnvClients(cp)
	ctx := t.Context()
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "deploymentgrids.superedge.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CRD present before the controller ran: %v", err)
	}
	e.startController(t, func(o *Options) { o.ManageCRDs = true; o.CRDCheckInterval = 500 * time.Millisecond })

	testwait.Eventually(t.Context(), t, 30*time.Second, "CRDs installed and undrifted", func(ctx context.Context) error {
		drifted, err := CRDsDrifted(ctx, e.ext)
		if err != nil {
			return err
		}
		if len(drifted) > 0 {
			return fmt.Errorf("drifted: %v", drifted)
		}
		return nil
	})
	// The grids are served: the controller reconciles one.
	e.node(t, "n", map[string]string{"site": "one"})
	if _, err := e.grids.SuperedgeV1().DeploymentGrids("default").Create(ctx, simpleDeploymentGrid("default", "web", "site", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDeployments(t, "default", "web", "web-one")

	// Someone drops a short name with a plain update; the keeper restores it.
	patch := []byte(`{"spec":{"names":{"shortNames":["dgx"]}}}`)
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, "deploymentgrids.superedge.io", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t.Context(), t, 30*time.Second, "short name dg restored", func(ctx context.Context) error {
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "deploymentgrids.superedge.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Equal(crd.Spec.Names.ShortNames, []string{"dg"}) {
			return fmt.Errorf("shortNames %v", crd.Spec.Names.ShortNames)
		}
		return nil
	})
}
