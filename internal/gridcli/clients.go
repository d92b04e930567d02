package gridcli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// clients are built once per command from kubectl's flags.
type clients struct {
	kube      kubernetes.Interface
	grids     versioned.Interface
	dynamic   dynamic.Interface
	namespace string
}

func (o *options) clients() (*clients, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	c := &clients{namespace: ns}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.grids, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *clients) nodes(ctx context.Context) ([]corev1.Node, error) {
	l, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return l.Items, nil
}

// orNil turns NotFound into (nil, nil): the reports say what is missing.
func orNil[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

type usageError string

func (e usageError) Error() string { return string(e) }

func errUsage(format string, args ...any) error { return usageError(fmt.Sprintf(format, args...)) }
