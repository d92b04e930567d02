package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/servicegroup/servicegroup/autonomy/webhook"
	"github.com/servicegroup/servicegroup/client/clientset/versioned"
)

// NewAutonomyWebhook builds the autonomy webhook every replica serves
// (leader or not: the apiserver calls any of them), with the controller's
// metrics registry and an Event recorder of its own.
func NewAutonomyWebhook(ctx context.Context, o Options, wo webhook.Options) (*webhook.Server, error) {
	// Nodes in protobuf: what a failing nodeunit's reads cost on the wire.
	cfg := rest.CopyConfig(o.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	grids, err := versioned.NewForConfig(o.Config)
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	context.AfterFunc(ctx, broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "application-grid-controller"})
	s, err := webhook.New(wo, kube, grids, recorder, registry)
	if err != nil {
		return nil, err
	}
	s.RequireNodeRestrictedKeys = o.RequireNodeRestrictedGridKeys
	return s, nil
}
