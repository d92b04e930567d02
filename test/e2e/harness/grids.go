package harness

import (
	"bytes"
	"context"
	"fmt"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	superedgev1 "github.com/servicegroup/servicegroup/apis/superedge/v1"
	"github.com/servicegroup/servicegroup/build/crds"
	"github.com/servicegroup/servicegroup/client/clientset/versioned/scheme"
	"github.com/servicegroup/servicegroup/internal/testbin"
)

// DemoExamples are SuperEdge's demo grids in examples/, applied as-is.
var DemoExamples = []string{"deploymentgrid.yaml", "statefulsetgrid.yaml", "servicegrid.yaml"}

// WaitGridCRDs waits until the superedge.io CRDs (installed by the
// controller at start) are Established.
func (c *Cluster) WaitGridCRDs(ctx context.Context) error {
	ext, err := apiextensionsclient.NewForConfig(c.CP.Config)
	if err != nil {
		return err
	}
	return crds.WaitEstablished(ctx, ext, time.Minute)
}

// ApplyExamples creates the named files of the repository's examples/
// directory, unchanged.
func (c *Cluster) ApplyExamples(ctx context.Context, names ...string) error {
	return c.ApplyExamplesWithKey(ctx, GridKey, names...)
}

// ApplyExamplesWithKey creates the named examples with their gridUniqKey
// (GridKey in the files) replaced by key; nothing else changes.
func (c *Cluster) ApplyExamplesWithKey(ctx context.Context, key string, names ...string) error {
	for _, name := range names {
		data, err := testbin.ReadRepoFile("examples", name)
		if err != nil {
			return err
		}
		line := []byte("gridUniqKey: " + GridKey + "\n")
		if !bytes.Contains(data, line) {
			return fmt.Errorf("examples/%s: no line %q to re-key", name, line)
		}
		data = bytes.ReplaceAll(data, line, []byte("gridUniqKey: "+key+"\n"))
		if err := c.CreateGrid(ctx, data); err != nil {
			return fmt.Errorf("examples/%s: %w", name, err)
		}
	}
	return nil
}

// CreateGrid creates one grid from its YAML manifest, with strict field
// validation (a manifest the API would silently trim is an error).
func (c *Cluster) CreateGrid(ctx context.Context, manifest []byte) error {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(manifest, nil, nil)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	v1 := c.Grids.SuperedgeV1()
	switch o := obj.(type) {
	case *superedgev1.DeploymentGrid:
		_, err = v1.DeploymentGrids(o.Namespace).Create(ctx, o, opts)
	case *superedgev1.StatefulSetGrid:
		_, err = v1.StatefulSetGrids(o.Namespace).Create(ctx, o, opts)
	case *superedgev1.ServiceGrid:
		_, err = v1.ServiceGrids(o.Namespace).Create(ctx, o, opts)
	default:
		return fmt.Errorf("not a grid: %T", obj)
	}
	return err
}
