package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/servicegroup/servicegroup/internal/testbin"
	"github.com/servicegroup/servicegroup/internal/testwait"
	"github.com/servicegroup/servicegroup/test/controlplane"
	"github.com/servicegroup/servicegroup/wrapper/sitestream"
)

// TestSiteStreamComponent installs build/manifests/default with the
// site-stream component for real (no Pod Security warning), checks what the wrappers' ServiceAccount
// may do, that the projected token's audience is one the apiserver itself
// refuses, and runs two wrappers of one site with that ServiceAccount and
// the component's flags: one takes the Lease, the other reads from it with
// the peer token, and neither is refused anything.
func TestSiteStreamComponent(t *testing.T) {
	t.Parallel() // its own control plane
	cp := controlplane.StartForTest(t, controlplane.Options{})
	k := newKubectl(t, cp)
	applyNamespaces(k)
	applyPrerequisites(k)
	overlay := defaultWithComponent(t, "site-stream")
	// The namespaces carry their Pod Security labels: admission warns about
	// a pod template the component made break them.
	if out := k.must("apply", "--server-side", "-k", overlay); strings.Contains(out, "Warning") || strings.Contains(out, "PodSecurity") {
		t.Errorf("default + site-stream: apply warned:\n%s", out)
	}

	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	ds, err := admin.AppsV1().DaemonSets("edge-system").Get(ctx, "application-grid-wrapper", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flags, audience := siteStreamFlags(t, ds)
	if audience != sitestream.PeerAudience {
		t.Fatalf("the projected peer token's audience is %q, want %q", audience, sitestream.PeerAudience)
	}
	const sa = "system:serviceaccount:edge-system:servicegroup-wrapper"
	for _, tc := range []struct{ verb, what, ns, want string }{
		{"get", "leases.coordination.k8s.io", "edge-system", "yes"},
		{"create", "leases.coordination.k8s.io", "edge-system", "yes"},
		{"update", "leases.coordination.k8s.io", "edge-system", "yes"},
		{"delete", "leases.coordination.k8s.io", "edge-system", "no"},
		{"update", "leases.coordination.k8s.io", "kube-system", "no"},
		{"create", "tokenreviews.authentication.k8s.io", "", "yes"},
	} {
		args := []string{tc.verb, tc.what, "--as=" + sa}
		if tc.ns != "" {
			args = append(args, "-n", tc.ns)
		}
		if got := k.canI(args...); got != tc.want {
			t.Errorf("the wrappers may %s %s in %q: %q, want %q", tc.verb, tc.what, tc.ns, got, tc.want)
		}
	}

	// A token of that audience: a leader's TokenReview (as the wrappers'
	// ServiceAccount) accepts it; the apiserver does not take it as a
	// credential of its own.
	tr, err := admin.CoreV1().ServiceAccounts("edge-system").CreateToken(ctx, "servicegroup-wrapper", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asWrapper := rest.CopyConfig(cp.Config)
	asWrapper.Impersonate = rest.ImpersonationConfig{UserName: sa}
	review, err := kubernetes.NewForConfigOrDie(asWrapper).AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token, Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != sa {
		t.Errorf("a peer token reviewed for its audience: %+v", review.Status)
	}
	upstream := rest.AnonymousClientConfig(cp.Config)
	upstream.BearerToken = tr.Status.Token
	if _, err := kubernetes.NewForConfigOrDie(upstream).CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("the apiserver accepted a peer token as a credential")
	}

	// Two wrappers of one site, with the component's flags.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _, err := cp.ServiceAccountKubeconfig(ctx, "edge-system", "servicegroup-wrapper")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node0", "node1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{flags["--site-label"]: "shop"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bin := testbin.Path(t, "application-grid-wrapper")
	start := func(node string) *component {
		peer := controlplane.FreeAddress(t)
		if _, port, _ := net.SplitHostPort(flags["--peer-bind-address"]); port == "" {
			t.Fatalf("--peer-bind-address %q names no port", flags["--peer-bind-address"])
		}
		return startComponent(t, "wrapper-"+node, bin,
			"--kubeconfig="+kubeconfig, "--node-name="+node,
			"--bind-address="+controlplane.FreeAddress(t), "--insecure-plain-http",
			"--site-label="+flags["--site-label"], "--site-lease-namespace="+flags["--site-lease-namespace"],
			"--peer-bind-address="+peer, "--peer-token-file="+tokenFile, "--v=2")
	}
	leader := start("node0")
	waitLease := func(holder string) {
		t.Helper()
		testwait.Eventually(ctx, t, 0, holder+" holds the site's Lease", func(ctx context.Context) error {
			l, err := admin.CoordinationV1().Leases(flags["--site-lease-namespace"]).Get(ctx, "application-grid-wrapper-site-shop", metav1.GetOptions{})
			if err == nil && !strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), holder+"@") {
				err = fmt.Errorf("held by %q; the leader's log:\n%s", ptr.Deref(l.Spec.HolderIdentity, ""), leader.LogTail(40))
			}
			return err
		})
	}
	waitLease("node0")
	follower := start("node1")
	follows := regexp.MustCompile(`"Site stream source changed" .*leader="node0"`)
	testwait.Eventually(ctx, t, 0, "node1 reads from node0", func(context.Context) error {
		if !follows.MatchString(follower.Log()) {
			return fmt.Errorf("its log:\n%s", follower.LogTail(40))
		}
		return nil
	})
	// Long enough for the follower's lists and first watches through the
	// leader, each authenticated with a TokenReview.
	time.Sleep(3 * time.Second)
	for _, c := range []*component{leader, follower} {
		c.assertNoForbidden(t)
		for _, refused := range []string{"Refused a peer", "leader given up"} {
			if strings.Contains(c.Log(), refused) {
				t.Errorf("%s: %q:\n%s", c.Name, refused, c.LogTail(40))
			}
		}
	}
}

// siteStreamFlags returns the wrapper container's site-stream flags and
// the audience of its projected peer token.
func siteStreamFlags(t *testing.T, ds *appsv1.DaemonSet) (map[string]string, string) {
	t.Helper()
	flags := map[string]string{}
	c := ds.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		if name, value, ok := strings.Cut(a, "="); ok && (strings.HasPrefix(name, "--site-") || strings.HasPrefix(name, "--peer-")) {
			flags[name] = value
		}
	}
	for _, f := range []string{"--site-label", "--site-lease-namespace", "--peer-bind-address", "--peer-token-file"} {
		if flags[f] == "" {
			t.Fatalf("the wrapper's args set no %s: %v", f, c.Args)
		}
	}
	audience := ""
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && filepath.Join(m.MountPath, src.ServiceAccountToken.Path) == flags["--peer-token-file"] {
					audience = src.ServiceAccountToken.Audience
				}
			}
		}
	}
	if audience == "" {
		out, _ := sigsyaml.Marshal(ds.Spec.Template.Spec)
		t.Fatalf("--peer-token-file %s is no projected ServiceAccount token:\n%s", flags["--peer-token-file"], out)
	}
	return flags, audience
}
