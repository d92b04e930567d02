package controlplane

import (
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
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
	token := tr.Status.Token

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.pki.caCertPEM}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	path := filepath.Join(cp.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", nil, err
	}
	restCfg := &rest.Config{
		Host:            cp.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caCertPEM},
		QPS:             cp.Config.QPS,
		Burst:           cp.Config.Burst,
	}
	return path, restCfg, nil
}
