package controlplane

import (
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig requests a token for an existing ServiceAccount
// (TokenRequest API) and writes a kubeconfig that authenticates with it, so a
// component can run with exactly that account's permissions. It returns the
// kubeconfig path and a matching rest.Config.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, *rest.Config, error) {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", nil, err
	}
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return cp.tokenKubeconfig(fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name), tr.Status.Token)
}

// PodServiceAccountKubeconfig is ServiceAccountKubeconfig with the token a
// Pod of the account on node gets from its projected volume: bound to that
// Pod (PodToken), so the apiserver names node in the user's extra
// (authentication.kubernetes.io/node-name), as for a DaemonSet's Pod.
func (cp *ControlPlane) PodServiceAccountKubeconfig(ctx context.Context, namespace, name, node string) (string, *rest.Config, error) {
	token, err := cp.PodToken(ctx, namespace, name, node)
	if err != nil {
		return "", nil, err
	}
	return cp.tokenKubeconfig(fmt.Sprintf("sa-%s-%s-%s.kubeconfig", namespace, name, node), token)
}

// PodToken returns a token of the ServiceAccount namespace/name for
// audiences (none: the apiserver's) bound to a Pod of that account on node,
// which it creates once (named name-node; nothing runs it).
func (cp *ControlPlane) PodToken(ctx context.Context, namespace, name, node string, audiences ...string) (string, error) {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + node, Namespace: namespace},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: name,
			Containers: []corev1.Container{{Name: "main", Image: name}}},
	}
	created, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = client.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("pod of %s/%s on %s: %w", namespace, name, node, err)
	}
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &expiry,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: created.Name, UID: created.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to its pod on %s: %w", namespace, name, node, err)
	}
	return tr.Status.Token, nil
}

// tokenKubeconfig writes a kubeconfig (file under cp.Dir) authenticating
// with token.
func (cp *ControlPlane) tokenKubeconfig(file, token string) (string, *rest.Config, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.pki.ca.CertPEM}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(cp.Dir, file)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", nil, err
	}
	restCfg := &rest.Config{
		Host:            cp.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.ca.CertPEM},
		QPS:             cp.Config.QPS,
		Burst:           cp.Config.Burst,
	}
	return path, restCfg, nil
}
