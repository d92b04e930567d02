package integration

import (
	"context"
	"errors"
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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// refuses, that the shipped Lease policy lets a wrapper hold a site's Lease
// only as the node its Pod's token is bound to, and runs two wrappers of
// one site with that ServiceAccount (each with its Pod's tokens, as the
// DaemonSet's projected volumes give them) and the component's flags: one
// takes the Lease, the other reads from it with the peer token, and
// neither is refused anything.
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

	for _, n := range []string{"node0", "node1"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{flags["--site-label"]: "shop"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A peer token of a wrapper Pod names its node in its review.
	podPeer, err := cp.PodToken(ctx, "edge-system", "servicegroup-wrapper", "node0", audience)
	if err != nil {
		t.Fatal(err)
	}
	review, err = kubernetes.NewForConfigOrDie(asWrapper).AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: podPeer, Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.User.Extra[sitestream.NodeNameExtra]; len(got) != 1 || got[0] != "node0" {
		t.Errorf("the review of a wrapper Pod's peer token on node0 names node %v: %+v", got, review.Status)
	}

	checkLeasePolicy(t, cp, flags["--site-lease-namespace"])

	// Two wrappers of one site, with the component's flags.
	bin := testbin.Path(t, "application-grid-wrapper")
	start := func(node string) *component {
		// The Pod's tokens: for the apiserver, and for its peers.
		kubeconfig, _, err := cp.PodServiceAccountKubeconfig(ctx, "edge-system", "servicegroup-wrapper", node)
		if err != nil {
			t.Fatal(err)
		}
		peerToken, err := cp.PodToken(ctx, "edge-system", "servicegroup-wrapper", node, audience)
		if err != nil {
			t.Fatal(err)
		}
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte(peerToken), 0o600); err != nil {
			t.Fatal(err)
		}
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

// checkLeasePolicy: with the shipped policy in force, a wrapper (its Pod's
// token, bound to its node) may create, take over and release a site's
// Lease only as its own node, may write no other Lease, and a token of the
// wrappers' ServiceAccount bound to no Pod may write none; the operator
// (admin) may write any.
func checkLeasePolicy(t *testing.T, cp *controlplane.ControlPlane, ns string) {
	t.Helper()
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	asPodOf := func(node string) kubernetes.Interface {
		_, cfg, err := cp.PodServiceAccountKubeconfig(ctx, "edge-system", "servicegroup-wrapper", node)
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	node0, node1 := asPodOf("node0"), asPodOf("node1")
	_, unbound, err := cp.ServiceAccountKubeconfig(ctx, "edge-system", "servicegroup-wrapper")
	if err != nil {
		t.Fatal(err)
	}
	noPod := kubernetes.NewForConfigOrDie(unbound)
	pin := strings.Repeat("0a", 32)
	id := func(node string) string { return node + "@10.0.0.1:51009#" + pin }
	lease := func(name, holder string) *coordinationv1.Lease {
		now := metav1.NowMicro()
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now}}
	}
	const name = "application-grid-wrapper-site-policy"
	refused := func(err error) bool {
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "servicegroup-site-leases")
	}

	// In force once the apiserver has compiled it: node0 creating the
	// Lease as node1 is refused.
	var last error
	testwait.Eventually(ctx, t, time.Minute, "the Lease policy refuses node0 holding a Lease as node1", func(ctx context.Context) error {
		_, last = node0.CoordinationV1().Leases(ns).Create(ctx, lease(name, id("node1")), metav1.CreateOptions{})
		if last == nil {
			if err := admin.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			return errors.New("created")
		}
		if !refused(last) {
			return last
		}
		return nil
	})
	t.Logf("node0 holding a Lease as node1: %v", last)
	update := func(c kubernetes.Interface, holder string) error {
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NowMicro()
		l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To(holder), &now
		_, err = c.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	if _, err := node0.CoordinationV1().Leases(ns).Create(ctx, lease(name, id("node0")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("node0 creating a site Lease as itself: %v", err)
	}
	for _, tc := range []struct {
		what   string
		c      kubernetes.Interface
		holder string
		allow  bool
	}{
		{"node0 renews as itself", node0, id("node0"), true},
		{"node1 takes it as node0", node1, id("node0"), false},
		{"node1 releases node0's", node1, "", false},
		{"a token bound to no Pod takes it", noPod, id("node1"), false},
		{"node1 takes it as itself", node1, id("node1"), true},
		{"node0 takes it back as node1", node0, id("node1"), false},
		{"node0 releases node1's", node0, "", false},
		{"node1 releases its own", node1, "", true},
		{"node0 takes the released one as itself", node0, id("node0"), true},
		{"the operator writes any holder", admin, id("node9"), true},
	} {
		err := update(tc.c, tc.holder)
		switch {
		case tc.allow && err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case !tc.allow && !refused(err):
			t.Errorf("%s: %v, want the policy's refusal", tc.what, err)
		}
	}
	if _, err := node0.CoordinationV1().Leases(ns).Create(ctx, lease("something-else", id("node0")), metav1.CreateOptions{}); !refused(err) {
		t.Errorf("node0's wrapper creating a Lease that is no site's: %v, want the policy's refusal", err)
	}
	if err := admin.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
