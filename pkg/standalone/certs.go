package standalone

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// ServingCert is the self-signed serving certificate of a server given no
// --tls-cert-file: a CA kept in Dir for ten years (client-go's
// NewSelfSignedCACert, as kubeadm's CA), and a leaf it signs, renewed well
// before it expires, at start-up and while running. Clients trust the CA
// (the written kubeconfig does), so they keep working across renewals; the
// generic server reloads the leaf's files by itself
// (dynamiccertificates.DynamicCertKeyPairContent).
type ServingCert struct {
	Dir string
	// Host is the leaf's common name; DNSNames and IPs its SANs.
	Host     string
	DNSNames []string
	IPs      []net.IP
	// Validity is the leaf's lifetime; it is renewed once less than a
	// third of it is left.
	Validity time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c ServingCert) CAFile() string    { return filepath.Join(c.Dir, "ca.crt") }
func (c ServingCert) caKeyFile() string { return filepath.Join(c.Dir, "ca.key") }

// CertFile holds the leaf and the CA, the chain a client is sent.
func (c ServingCert) CertFile() string { return filepath.Join(c.Dir, "apiserver.crt") }
func (c ServingCert) KeyFile() string  { return filepath.Join(c.Dir, "apiserver.key") }

func (c ServingCert) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Ensure writes the CA if there is none (or it is about to expire) and the
// leaf if there is none, it is past two thirds of its life, its names
// differ from the wanted ones, or the CA changed. It reports whether it
// wrote a new leaf.
func (c ServingCert) Ensure() (bool, error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return false, err
	}
	ca, caKey, err := c.loadOrCreateCA()
	if err != nil {
		return false, err
	}
	if leaf, err := loadCert(c.CertFile()); err == nil && !c.leafStale(leaf, ca) {
		return false, nil
	}
	return true, c.writeLeaf(ca, caKey)
}

func (c ServingCert) loadOrCreateCA() (*x509.Certificate, crypto.Signer, error) {
	ca, err := loadCert(c.CAFile())
	if err == nil {
		var key any
		if key, err = keyutil.PrivateKeyFromFile(c.caKeyFile()); err == nil {
			signer, ok := key.(crypto.Signer)
			// A CA within a year of its end is replaced: its leaves
			// could not outlive it.
			if ok && c.now().Add(365*24*time.Hour).Before(ca.NotAfter) {
				return ca, signer, nil
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ca, err = certutil.NewSelfSignedCACert(certutil.Config{CommonName: c.Host + "-ca@" + fmt.Sprint(c.now().Unix())}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the serving CA: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, err
	}
	if err := keyutil.WriteKey(c.caKeyFile(), keyPEM); err != nil {
		return nil, nil, err
	}
	if err := certutil.WriteCert(c.CAFile(), encodeCertPEM(ca)); err != nil {
		return nil, nil, err
	}
	klog.InfoS("Created the self-signed serving CA", "file", c.CAFile(), "notAfter", ca.NotAfter)
	return ca, key, nil
}

// leafStale reports whether the leaf must be replaced.
func (c ServingCert) leafStale(leaf, ca *x509.Certificate) bool {
	if leaf.CheckSignatureFrom(ca) != nil {
		return true
	}
	lifetime := leaf.NotAfter.Sub(leaf.NotBefore)
	if c.now().After(leaf.NotAfter.Add(-lifetime / 3)) {
		return true
	}
	if leaf.Subject.CommonName != c.Host || !slices.Equal(leaf.DNSNames, c.dnsNames()) {
		return true
	}
	return !slices.EqualFunc(leaf.IPAddresses, c.IPs, func(a, b net.IP) bool { return a.Equal(b) })
}

func (c ServingCert) dnsNames() []string {
	names := []string{c.Host}
	for _, n := range c.DNSNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func (c ServingCert) writeLeaf(ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := c.now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: c.Host},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(c.Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              c.dnsNames(),
		IPAddresses:           c.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	var chain bytes.Buffer
	chain.Write(encodeCertPEM(&x509.Certificate{Raw: der}))
	chain.Write(encodeCertPEM(ca))
	// The key first: the server reloads when either file changes, and a
	// new certificate with the old key would not load.
	if err := writeAtomically(c.KeyFile(), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeAtomically(c.CertFile(), chain.Bytes(), 0o644); err != nil {
		return err
	}
	klog.InfoS("Wrote the self-signed serving certificate", "file", c.CertFile(), "notAfter", template.NotAfter,
		"dnsNames", template.DNSNames)
	return nil
}

// Renew checks the leaf every tenth of its validity (at most hourly) until
// ctx ends, and renews it when Ensure would.
func (c ServingCert) Renew(ctx context.Context) {
	interval := min(c.Validity/10, time.Hour)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := c.Ensure(); err != nil {
			klog.ErrorS(err, "Cannot renew the self-signed serving certificate")
		}
	}
}

func loadCert(path string) (*x509.Certificate, error) {
	certs, err := certutil.CertsFromFile(path)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// writeAtomically replaces path in one rename, so that the server's reload
// never reads half a file.
func writeAtomically(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func encodeCertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw})
}
