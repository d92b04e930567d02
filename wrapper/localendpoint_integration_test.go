package wrapper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/servicegroup/servicegroup/wrapper"
)

// TestLocalEndpointOnlyWhereMeant: a user whose only right is editing
// Endpoints in "default" cannot send edge pods' apiserver traffic anywhere
// through the local-endpoint annotations: an address outside the allowed
// ranges (loopback and link-local by default), a link-local address that is
// not this node's, or a port other than the lite-apiserver's leaves
// default/kubernetes served as the apiserver publishes it; a node-local
// address and port are honoured.
func TestLocalEndpointOnlyWhereMeant(t *testing.T) {
	t.Parallel() // its own control plane
	cp, admin := startTestCluster(t, "")
	ctx := t.Context()
	kep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}, Ports: []corev1.EndpointPort{{Name: "https", Port: 6443}}}},
	}
	if _, err := admin.CoreV1().Endpoints("default").Create(ctx, kep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The user may get, update and patch Endpoints in default, nothing else.
	if _, err := admin.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints-editor"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"get", "update", "patch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "endpoints-editor"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "endpoints-editor"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := cp.IssueClientCertificate("endpoints-editor")
	if err != nil {
		t.Fatal(err)
	}
	editor := kubernetes.NewForConfigOrDie(&rest.Config{Host: cp.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertificate(), CertData: certPEM, KeyData: keyPEM}})
	if _, err := editor.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the editor may list Services: the test's user has more rights than meant")
	}

	// 169.254.20.11 is on this node (SuperEdge's edge virtual address, on a
	// dummy interface of every edge node); 169.254.20.99 is another
	// device's on the site's network.
	w := startWrapper(t, cp, "node0", "", wrapper.WithLocalAddrs(wrapper.Options{}, "169.254.20.11"))
	c := clientFor(t, w.URL(), "")
	annotate := func(ip, port string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"superedge.io/local-endpoint":%q,"superedge.io/local-port":%q}}}`, ip, port)
		if _, err := editor.CoreV1().Endpoints("default").Patch(ctx, "kubernetes", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// served waits until the wrapper serves the annotation ip and returns
	// the served address:port.
	served := func(ip, port string) string {
		t.Helper()
		var got string
		eventually(t, "the wrapper serves the annotated Endpoints", 2*time.Minute, func(ctx context.Context) (bool, error) {
			ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
			if err != nil || ep.Annotations["superedge.io/local-endpoint"] != ip || ep.Annotations["superedge.io/local-port"] != port {
				return false, err
			}
			if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || len(ep.Subsets[0].Ports) != 1 {
				return false, fmt.Errorf("subsets %+v", ep.Subsets)
			}
			got = fmt.Sprintf("%s:%d", ep.Subsets[0].Addresses[0].IP, ep.Subsets[0].Ports[0].Port)
			return true, nil
		})
		return got
	}

	for _, ip := range []string{"192.0.2.66", "10.96.0.10", "2001:db8::66", "169.254.20.99"} {
		annotate(ip, "51003")
		if got := served(ip, "51003"); got != "192.0.2.1:6443" {
			t.Errorf("local-endpoint %s: default/kubernetes served as %s, want the apiserver's 192.0.2.1:6443 unchanged", ip, got)
		}
	}
	// A local address, but a port that is not the lite-apiserver's (the
	// kubelet's; a port a process of the attacker's listens on).
	for _, port := range []string{"10250", "4444"} {
		annotate("127.0.0.1", port)
		if got := served("127.0.0.1", port); got != "192.0.2.1:6443" {
			t.Errorf("local-endpoint 127.0.0.1:%s: default/kubernetes served as %s, want the apiserver's 192.0.2.1:6443 unchanged", port, got)
		}
	}
	for ip, want := range map[string]string{"127.0.0.1": "127.0.0.1:51003", "169.254.20.11": "169.254.20.11:51003"} {
		annotate(ip, "51003")
		if got := served(ip, "51003"); got != want {
			t.Errorf("local-endpoint %s: default/kubernetes served as %s, want %s", ip, got, want)
		}
	}
}
