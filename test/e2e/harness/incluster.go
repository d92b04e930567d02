package harness

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// Node components run as the manifests start them in a pod: in-cluster
// config (rest.InClusterConfig) with the upstream address from the shipped
// ConfigMap and their ServiceAccount's token at the fixed pod path. The
// harness substitutes only what a test machine must: the upstream address
// (the test apiserver's) and the ServiceAccount credentials (a TokenRequest
// token and the test CA).

// saDir is where rest.InClusterConfig reads a pod's credentials, below /run
// (/var/run is a symlink to it on the hosts the harness runs on).
const saDir = "secrets/kubernetes.io/serviceaccount"

// shippedUpstream is the upstream ConfigMap's data with the address replaced
// by the test apiserver's: every other key stays as shipped.
func (c *Cluster) shippedUpstream() (map[string]string, error) {
	env, err := readUpstreamEnv()
	if err != nil {
		return nil, err
	}
	if env["KUBERNETES_SERVICE_HOST"] == "" || env["KUBERNETES_SERVICE_PORT"] == "" {
		return nil, fmt.Errorf("%s must set KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, got %v", UpstreamEnvFile, env)
	}
	u, err := url.Parse(c.CP.URL)
	if err != nil {
		return nil, err
	}
	env["KUBERNETES_SERVICE_HOST"] = u.Hostname()
	env["KUBERNETES_SERVICE_PORT"] = u.Port()
	return env, nil
}

// applyEdgeRBAC creates the ServiceAccounts and roles of the shipped wrapper
// and coredns-node manifests (once per cluster), so the node components run
// with exactly the permissions the manifests grant.
func (c *Cluster) applyEdgeRBAC(ctx context.Context) error {
	c.rbacOnce.Do(func() { c.rbacErr = c.createEdgeRBAC(ctx) })
	return c.rbacErr
}

func (c *Cluster) createEdgeRBAC(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "edge-system"}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, rel := range edgeRBAC {
		objs, err := readManifestObjects(rel)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := c.createRBACObject(ctx, o); err != nil {
				return fmt.Errorf("%s: %s: %w", rel, o.kind, err)
			}
		}
	}
	return nil
}

func (c *Cluster) createRBACObject(ctx context.Context, o manifestObject) error {
	var err error
	create := metav1.CreateOptions{}
	switch o.kind {
	case "ServiceAccount":
		var v corev1.ServiceAccount
		if err = sigsyaml.UnmarshalStrict(o.data, &v); err == nil {
			_, err = c.Client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, &v, create)
		}
	case "ClusterRole":
		var v rbacv1.ClusterRole
		if err = sigsyaml.UnmarshalStrict(o.data, &v); err == nil {
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, &v, create)
		}
	case "ClusterRoleBinding":
		var v rbacv1.ClusterRoleBinding
		if err = sigsyaml.UnmarshalStrict(o.data, &v); err == nil {
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &v, create)
		}
	case "Role":
		var v rbacv1.Role
		if err = sigsyaml.UnmarshalStrict(o.data, &v); err == nil {
			_, err = c.Client.RbacV1().Roles(v.Namespace).Create(ctx, &v, create)
		}
	case "RoleBinding":
		var v rbacv1.RoleBinding
		if err = sigsyaml.UnmarshalStrict(o.data, &v); err == nil {
			_, err = c.Client.RbacV1().RoleBindings(v.Namespace).Create(ctx, &v, create)
		}
	default:
		return fmt.Errorf("kind %q is not known to the harness", o.kind)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// podRunDir writes what a pod of the ServiceAccount finds below /run: its
// token (TokenRequest, as the kubelet's projected volume gets it), the
// cluster CA and its namespace. It returns the directory to mount on /run.
// A restarted process finds the files of its first start, as a restarted
// container finds its pod's volumes (no apiserver needed).
func (c *Cluster) podRunDir(ctx context.Context, name string, sc *shippedContainer) (string, error) {
	run := filepath.Join(c.Dir, "run-"+name)
	if _, err := os.Stat(filepath.Join(run, saDir, corev1.ServiceAccountTokenKey)); err == nil {
		return run, nil
	}
	expiry := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(sc.Namespace).CreateToken(ctx, sc.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s: %w", sc.Namespace, sc.ServiceAccount, err)
	}
	dir := filepath.Join(run, saDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for file, data := range map[string][]byte{
		corev1.ServiceAccountTokenKey:     []byte(tr.Status.Token),
		corev1.ServiceAccountRootCAKey:    c.CP.CACertificate(),
		corev1.ServiceAccountNamespaceKey: []byte(sc.Namespace),
	} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			return "", err
		}
	}
	return run, nil
}

// inClusterCommand runs bin inside the node's network namespace and in a
// mount namespace of its own where runDir is mounted on /run, so that
// rest.InClusterConfig finds the credentials at the pod path. Nothing is
// mounted in the harness's mount namespace; the process sees only the
// shipped environment (plus PATH), as a container sees only its own.
func inClusterCommand(ctx context.Context, ns *NetNS, runDir string, env []string, bin string, args ...string) *exec.Cmd {
	// sh's $0 is runDir, "$@" the program and its arguments; exec keeps the PID.
	wrapped := append([]string{"--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /run && exec "$@"`, runDir, bin}, args...)
	cmd := ns.Command(ctx, "unshare", wrapped...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

// imageBinaries maps our images (build/) to the binaries that are their
// entrypoints.
var imageBinaries = map[string]string{
	"servicegroup/application-grid-wrapper": "application-grid-wrapper",
	"servicegroup/coredns-gridhosts":        "coredns",
}

// runInitContainers runs the pod's init containers to completion, in order,
// as the kubelet does before the container starts, with hostPath mounts
// mapped under hostDir. One without a command runs the entrypoint of its
// image, one of ours (imageBinaries); one with a command runs it from the
// host (a shell and coreutils are on every test host, as in a busybox image).
func (c *Cluster) runInitContainers(ctx context.Context, ns *NetNS, runDir, hostDir string, sc *shippedContainer) error {
	for _, ic := range sc.Init {
		argv, err := ic.withHostPaths(hostDir, append(slices.Clone(ic.Command), ic.Args...))
		if err != nil {
			return err
		}
		if len(ic.Command) == 0 {
			repo, _, _ := strings.Cut(ic.Image, ":")
			name, ok := imageBinaries[repo]
			if !ok {
				return fmt.Errorf("init container %s: image %s is not one of ours and has no command", ic.Name, ic.Image)
			}
			argv = append([]string{c.binaries[name]}, argv...)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		out, err := inClusterCommand(cctx, ns, runDir, ic.Env, argv[0], argv[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("init container %s %v: %w\n%s", ic.Name, argv, err, out)
		}
	}
	return nil
}

// rbacState is embedded in Cluster: the edge RBAC is created once.
type rbacState struct {
	rbacOnce sync.Once
	rbacErr  error
}
