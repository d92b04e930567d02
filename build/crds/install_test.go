package crds

import (
	"context"
	"errors"
	"testing"
	"time"

	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
)

// TestApplyAsksAgainWhileBusy: a CRD apply the apiserver answers with its
// request timeout (504) or 429 is asked again until it is accepted; any
// other error ends Apply at once, naming the CRD.
func TestApplyAsksAgainWhileBusy(t *testing.T) {
	defer func(b wait.Backoff) { applyBackoff = b }(applyBackoff)
	applyBackoff = wait.Backoff{Steps: 5, Duration: time.Millisecond, Factor: 1}
	crd := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	ms, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		answers []error // the first patches' answers; nil afterwards
		wantErr bool
		want    int // patches sent
	}{
		{"request timeout, then accepted", []error{apierrors.NewTimeoutError("request did not complete within requested timeout", 0)}, false, len(ms) + 1},
		{"server timeout and 429, then accepted", []error{apierrors.NewServerTimeout(crd, "patch", 1), apierrors.NewTooManyRequests("busy", 1)}, false, len(ms) + 2},
		{"busy every time", []error{busyErr(), busyErr(), busyErr(), busyErr(), busyErr()}, true, 5},
		{"forbidden", []error{apierrors.NewForbidden(crd, ms[0].Name, errors.New("no"))}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := apiextensionsfake.NewClientset()
			patches := 0
			client.PrependReactor("patch", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
				patches++
				if patches <= len(tc.answers) {
					return true, nil, tc.answers[patches-1]
				}
				return true, ms[0].CRD.DeepCopy(), nil
			})
			err := Apply(context.Background(), client)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Apply: %v, want an error: %v", err, tc.wantErr)
			}
			if patches != tc.want {
				t.Errorf("%d patches sent, want %d", patches, tc.want)
			}
		})
	}
}

func busyErr() error {
	return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
}
