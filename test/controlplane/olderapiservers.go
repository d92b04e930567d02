package controlplane

import (
	"context"
	"strings"
	"testing"

	"github.com/servicegroup/servicegroup/internal/testenv"
)

// APIServerRelease is one kube-apiserver release and its binary.
type APIServerRelease = OlderRelease

// APIServerReleases returns the cached kube-apiserver of KubernetesVersion
// followed by each older release in hack/apiserver-versions.txt, built by
// hack/apiserver-bins.sh (see OlderReleases).
func APIServerReleases(ctx context.Context) ([]APIServerRelease, error) {
	current, err := Binary(KubeAPIServer)
	if err != nil {
		return nil, err
	}
	older, err := OlderReleases(ctx, "apiserver", KubeAPIServer)
	if err != nil {
		return nil, err
	}
	return append([]APIServerRelease{{Version: KubernetesVersion, Binary: current}}, older...), nil
}

// APIServerReleasesForTest is APIServerReleases for t: skipped when a
// release is not built, failed on any other error.
func APIServerReleasesForTest(t testing.TB) []APIServerRelease {
	t.Helper()
	releases, err := APIServerReleases(t.Context())
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			testenv.Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	return releases
}
