package standalone

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const contextName = "event-apiserver"

// WriteKubeconfig writes a kubeconfig for the admin, trusting caBundle for
// the server at serverURL.
func WriteKubeconfig(path, serverURL string, caBundle []byte, adminToken string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[contextName] = &clientcmdapi.Cluster{
		Server:                   serverURL,
		CertificateAuthorityData: caBundle,
	}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: adminToken}
	cfg.Contexts[contextName] = &clientcmdapi.Context{
		Cluster:   contextName,
		AuthInfo:  AdminUser,
		Namespace: "default",
	}
	cfg.CurrentContext = contextName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	// The file carries the admin token.
	return os.Chmod(path, 0o600)
}
