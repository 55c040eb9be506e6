package servingcert

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// EtcdCerts describes the certificates of a StatefulSet etcd: a CA, a
// serving certificate for clients, a peer certificate for the members, and
// a client certificate for event-apiserver and kube-apiserver.
type EtcdCerts struct {
	Namespace string
	// Service is the StatefulSet's headless Service: members are
	// <pod>.<service>.<namespace>.svc.
	Service string
	// ClientService is the Service clients use.
	ClientService string
	// Prefix names the Secrets: <prefix>-ca, -server, -peer, -client.
	Prefix string
	// ExtraSANs are added to the serving certificate: DNS names or IPs by
	// which something outside the cluster's DNS (kube-apiserver on the host
	// network) reaches the members.
	ExtraSANs  []string
	CAValidity time.Duration
	Validity   time.Duration
}

// Secret names.
func (e EtcdCerts) CASecret() string     { return e.Prefix + "-ca" }
func (e EtcdCerts) ServerSecret() string { return e.Prefix + "-server" }
func (e EtcdCerts) PeerSecret() string   { return e.Prefix + "-peer" }
func (e EtcdCerts) ClientSecret() string { return e.Prefix + "-client" }

// Ensure creates whichever of the Secrets is missing, signing with the CA
// stored in <prefix>-ca (made first if missing). It never replaces a Secret
// that exists, so running it again (a Job retried, a second install) changes
// nothing; to rotate, delete the Secrets and run it again (docs/aggregated.md).
func (e EtcdCerts) Ensure(ctx context.Context, client kubernetes.Interface, now time.Time) error {
	secrets := client.CoreV1().Secrets(e.Namespace)
	caSecret, err := secrets.Get(ctx, e.CASecret(), metav1.GetOptions{})
	var ca *KeyPair
	switch {
	case apierrors.IsNotFound(err):
		if ca, err = NewCA(e.Prefix+"-ca", now, e.CAValidity); err != nil {
			return err
		}
		if err := e.create(ctx, client, e.CASecret(), corev1.SecretTypeOpaque, ca, nil); err != nil {
			return err
		}
		if caSecret, err = secrets.Get(ctx, e.CASecret(), metav1.GetOptions{}); err != nil {
			return err
		}
		fallthrough
	case err == nil:
		if ca, err = ParseKeyPair(caSecret.Data[KeyCACert], caSecret.Data[KeyCAKey]); err != nil {
			return fmt.Errorf("secret %s/%s: %w", e.Namespace, e.CASecret(), err)
		}
	default:
		return err
	}

	members := []string{
		"*." + e.Service + "." + e.Namespace + ".svc",
		"*." + e.Service + "." + e.Namespace + ".svc.cluster.local",
	}
	client_ := []string{
		e.ClientService + "." + e.Namespace + ".svc",
		e.ClientService + "." + e.Namespace + ".svc.cluster.local",
		"localhost",
	}
	serverNames := append(append(append([]string(nil), members...), client_...), e.ExtraSANs...)
	dns, ips := splitSANs(serverNames)
	ips = append(ips, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	leaves := []struct {
		secret string
		leaf   Leaf
	}{
		{e.ServerSecret(), Leaf{CommonName: e.ClientService, DNSNames: dns, IPs: ips, Usages: both}},
		{e.PeerSecret(), Leaf{CommonName: e.Service, DNSNames: members, Usages: both}},
		{e.ClientSecret(), Leaf{CommonName: "event-apiserver", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
	}
	for _, l := range leaves {
		if _, err := secrets.Get(ctx, l.secret, metav1.GetOptions{}); err == nil {
			klog.InfoS("Secret exists, left as it is", "secret", klog.KRef(e.Namespace, l.secret))
			continue
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		kp, err := ca.Issue(l.leaf, now, e.Validity)
		if err != nil {
			return err
		}
		if err := e.create(ctx, client, l.secret, corev1.SecretTypeTLS, kp, ca.CertPEM); err != nil {
			return err
		}
	}
	return nil
}

// create stores kp (with the CA certificate as ca.crt when caCert is set);
// a Secret made meanwhile by someone else is as good as ours.
func (e EtcdCerts) create(ctx context.Context, client kubernetes.Interface, name string, typ corev1.SecretType, kp *KeyPair, caCert []byte) error {
	data := map[string][]byte{KeyTLSCert: kp.CertPEM, KeyTLSKey: kp.KeyPEM, KeyCACert: caCert}
	if typ == corev1.SecretTypeOpaque {
		data = map[string][]byte{KeyCACert: kp.CertPEM, KeyCAKey: kp.KeyPEM}
	}
	_, err := client.CoreV1().Secrets(e.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": e.Service}},
		Type: typ,
		Data: data,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		klog.InfoS("Created Secret", "secret", klog.KRef(e.Namespace, name))
	}
	return err
}

func splitSANs(sans []string) (dns []string, ips []net.IP) {
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		} else if s != "" {
			dns = append(dns, s)
		}
	}
	return dns, ips
}
