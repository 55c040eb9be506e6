package servingcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
)

// Config says where the shared certificate lives and who must trust it.
type Config struct {
	Client kubernetes.Interface
	// APIServices is nil when no APIService is to be patched.
	APIServices     apiregistrationclient.APIServicesGetter
	APIServiceNames []string
	Namespace, Name string
	Policy          Policy
	// Resync is how often the Secret is read again: a renewal made by
	// another replica is served from the next read.
	Resync time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Controller keeps the shared Secret valid and serves its certificate. It is
// a dynamiccertificates.CertKeyContentProvider and ControllerRunner, so the
// generic secure server runs it and reloads the certificate on change.
type Controller struct {
	cfg Config

	mu        sync.RWMutex
	cert, key []byte
	listeners []dynamiccertificates.Listener
}

var (
	_ dynamiccertificates.CertKeyContentProvider = &Controller{}
	_ dynamiccertificates.ControllerRunner       = &Controller{}
)

func New(cfg Config) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Controller{cfg: cfg}
}

func (c *Controller) Name() string {
	return "secret/" + c.cfg.Namespace + "/" + c.cfg.Name
}

func (c *Controller) CurrentCertKeyContent() ([]byte, []byte) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert, c.key
}

func (c *Controller) AddListener(l dynamiccertificates.Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

// RunOnce makes sure the Secret holds a usable certificate, that every
// APIService trusts it, and serves it.
func (c *Controller) RunOnce(ctx context.Context) error {
	// A conflict means another replica wrote first; its Secret is read
	// and judged again. More than a few rounds means something rewrites
	// the Secret constantly, which retrying will not fix.
	const attempts = 5
	var err error
	for range attempts {
		var retry bool
		if retry, err = c.sync(ctx); !retry {
			return err
		}
	}
	return fmt.Errorf("%s: still conflicting after %d attempts: %w", c.Name(), attempts, err)
}

// Run re-syncs every Resync until ctx ends.
func (c *Controller) Run(ctx context.Context, _ int) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.RunOnce(ctx); err != nil {
			klog.ErrorS(err, "Serving certificate sync failed", "secret", klog.KRef(c.cfg.Namespace, c.cfg.Name))
		}
	}, c.cfg.Resync)
}

func (c *Controller) sync(ctx context.Context) (retry bool, err error) {
	secrets := c.cfg.Client.CoreV1().Secrets(c.cfg.Namespace)
	secret, err := secrets.Get(ctx, c.cfg.Name, metav1.GetOptions{})
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	var data map[string][]byte
	if found {
		data = secret.Data
	}
	next, reason, err := decide(c.cfg.Now(), data, c.cfg.Policy)
	if err != nil {
		return false, err
	}
	if reason != "" {
		if found {
			secret = secret.DeepCopy()
			secret.Data = next
			// The resourceVersion read above makes this a compare-and-swap.
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		} else {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: c.cfg.Name, Namespace: c.cfg.Namespace,
					Labels: map[string]string{"app.kubernetes.io/name": "event-apiserver"}},
				Type: corev1.SecretTypeTLS,
				Data: next,
			}, metav1.CreateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return true, err
		}
		if err != nil {
			return false, err
		}
		klog.InfoS("Wrote serving certificate", "secret", klog.KRef(c.cfg.Namespace, c.cfg.Name), "reason", reason)
	}
	// Trust first, serve second: kube-apiserver must know the CA before
	// any replica presents a certificate it signed.
	bundle, _ := parseCerts(next[KeyCABundle])
	for _, name := range c.cfg.APIServiceNames {
		if err := c.publish(ctx, name, bundle); err != nil {
			return false, err
		}
	}
	c.serve(next[KeyTLSCert], next[KeyTLSKey])
	return false, nil
}

// publish adds bundle to the APIService's caBundle. CAs already there and
// still valid are kept: another replica may have just added a newer CA
// than the Secret this replica read, and dropping it would fail requests
// to the replica serving from it.
func (c *Controller) publish(ctx context.Context, name string, bundle []*x509.Certificate) error {
	if c.cfg.APIServices == nil {
		return nil
	}
	client := c.cfg.APIServices.APIServices()
	const attempts = 5
	for range attempts {
		svc, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Nothing trusts us yet, so nothing can break; the next
			// sync publishes once the APIService exists.
			klog.V(2).InfoS("APIService not found, caBundle not published", "apiservice", name)
			return nil
		}
		if err != nil {
			return err
		}
		if svc.Spec.Service == nil {
			// kube-apiserver serves the group itself and routes nothing
			// here, so there is nothing to keep trusting us; a caBundle is
			// not even allowed on a local APIService.
			klog.ErrorS(nil, "APIService is served by kube-apiserver itself; start kube-apiserver with --runtime-config=<group>/<version>=false",
				"apiservice", name)
			return nil
		}
		published, _ := parseCerts(svc.Spec.CABundle)
		others := append(append([]*x509.Certificate(nil), bundle[1:]...), published...)
		want := encodeCerts(trustBundle(c.cfg.Now(), bundle[0], others))
		if bytes.Equal(want, svc.Spec.CABundle) {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": svc.ResourceVersion},
			"spec":     map[string]any{"caBundle": want},
		})
		if err != nil {
			return err
		}
		_, err = client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("patching APIService %s caBundle: %w", name, err)
		}
		klog.InfoS("Published CA bundle", "apiservice", name, "cas", bytes.Count(want, []byte("BEGIN CERTIFICATE")))
		return nil
	}
	return fmt.Errorf("patching APIService %s caBundle: still conflicting after %d attempts", name, attempts)
}

func (c *Controller) serve(cert, key []byte) {
	c.mu.Lock()
	changed := !bytes.Equal(cert, c.cert) || !bytes.Equal(key, c.key)
	if changed {
		c.cert, c.key = cert, key
	}
	listeners := c.listeners
	c.mu.Unlock()
	if !changed {
		return
	}
	klog.InfoS("Serving certificate loaded", "secret", klog.KRef(c.cfg.Namespace, c.cfg.Name))
	for _, l := range listeners {
		l.Enqueue()
	}
}
