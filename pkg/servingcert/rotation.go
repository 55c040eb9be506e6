package servingcert

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the shared Secret. tls.crt and tls.key are what a
// kubernetes.io/tls Secret requires; ca-bundle.crt is what the APIService
// must trust: the current CA first, then older CAs until they expire.
const (
	KeyCACert   = "ca.crt"
	KeyCAKey    = "ca.key"
	KeyCABundle = "ca-bundle.crt"
	KeyTLSCert  = corev1.TLSCertKey
	KeyTLSKey   = corev1.TLSPrivateKeyKey
)

// maxTrustedCAs bounds the bundle: with renewal at a fraction of the CA's
// lifetime at most two CAs are alive at once; one more absorbs a renewal
// forced by a broken Secret.
const maxTrustedCAs = 3

// Policy is what a serving certificate must be.
type Policy struct {
	// DNSNames the leaf must carry, e.g. <service>.<namespace>.svc.
	DNSNames []string
	// CAValidity and Validity are the lifetimes of the CA and of the leaf.
	CAValidity, Validity time.Duration
	// RenewFraction of a certificate's lifetime after which it is renewed,
	// e.g. 2/3: a one-year leaf is renewed after eight months.
	RenewFraction float64
}

// due reports whether c has lived past the renewal point of its lifetime,
// counted from when it was issued: NotBefore is backdated, and with short
// lifetimes the backdating would otherwise bring renewal forward.
func (p Policy) due(c *x509.Certificate, now time.Time) bool {
	issued := c.NotBefore
	if c.NotAfter.Sub(issued) > backdate {
		issued = issued.Add(backdate)
	}
	lifetime := c.NotAfter.Sub(issued)
	return !now.Before(issued.Add(time.Duration(float64(lifetime) * p.RenewFraction)))
}

// decide returns the Secret data that should be stored, given what is
// stored now (nil when there is no Secret), and why it differs; reason is
// empty when the stored data is fine as it is. It never changes a
// certificate that is valid, trusted and not due, so replicas that decide
// on the same Secret agree.
func decide(now time.Time, data map[string][]byte, p Policy) (next map[string][]byte, reason string, err error) {
	ca, caErr := ParseKeyPair(data[KeyCACert], data[KeyCAKey])
	if caErr == nil && !ca.Cert.IsCA {
		caErr = fmt.Errorf("%s is not a CA", KeyCACert)
	}
	trusted, _ := parseCerts(data[KeyCABundle])

	switch {
	case caErr != nil:
		reason = fmt.Sprintf("no usable CA (%v)", caErr)
	case p.due(ca.Cert, now):
		reason = fmt.Sprintf("CA expires at %s", ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if reason != "" {
		if ca, err = NewCA(fmt.Sprintf("event-apiserver-ca@%d", now.Unix()), now, p.CAValidity); err != nil {
			return nil, "", err
		}
	}
	bundle := trustBundle(now, ca.Cert, trusted)

	leaf, leafErr := ParseKeyPair(data[KeyTLSCert], data[KeyTLSKey])
	if leafErr == nil {
		leafErr = p.usable(leaf.Cert, bundle, now)
	}
	leafReason := ""
	switch {
	case leafErr != nil:
		leafReason = fmt.Sprintf("no usable serving certificate (%v)", leafErr)
	case p.due(leaf.Cert, now):
		leafReason = fmt.Sprintf("serving certificate expires at %s", leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if leafReason != "" {
		if leaf, err = ca.Issue(Leaf{
			CommonName: p.DNSNames[0],
			DNSNames:   p.DNSNames,
			Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}, now, p.Validity); err != nil {
			return nil, "", err
		}
		if reason == "" {
			reason = leafReason
		} else {
			reason += "; " + leafReason
		}
	}

	next = map[string][]byte{
		KeyCACert:   ca.CertPEM,
		KeyCAKey:    ca.KeyPEM,
		KeyCABundle: encodeCerts(bundle),
		KeyTLSCert:  leaf.CertPEM,
		KeyTLSKey:   leaf.KeyPEM,
	}
	if reason == "" && string(next[KeyCABundle]) != string(data[KeyCABundle]) {
		reason = "expired CA dropped from the bundle"
	}
	return next, reason, nil
}

// trustBundle is current followed by the other still-valid CAs of old,
// newest first, at most maxTrustedCAs.
func trustBundle(now time.Time, current *x509.Certificate, old []*x509.Certificate) []*x509.Certificate {
	bundle := []*x509.Certificate{current}
	for _, c := range old {
		if len(bundle) == maxTrustedCAs {
			break
		}
		if !c.IsCA || now.After(c.NotAfter) || slices.ContainsFunc(bundle, c.Equal) {
			continue
		}
		bundle = append(bundle, c)
	}
	return bundle
}

// usable reports why leaf cannot serve: a name missing, expired, or not
// signed by a CA in the bundle.
func (p Policy) usable(leaf *x509.Certificate, bundle []*x509.Certificate, now time.Time) error {
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}
	for _, name := range p.DNSNames {
		if _, err := leaf.Verify(x509.VerifyOptions{
			DNSName:     name,
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			return err
		}
	}
	return nil
}
