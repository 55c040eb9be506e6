package servingcert

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults: a CA that outlives any cluster upgrade cycle, a leaf renewed
// about every eight months, both at two thirds of their lifetime, which
// leaves a third of the lifetime for a failing renewal to be noticed.
const (
	DefaultCAValidity    = 10 * 365 * 24 * time.Hour
	DefaultValidity      = 365 * 24 * time.Hour
	DefaultRenewFraction = 2.0 / 3
	maxResync            = time.Minute
)

// Options are the flags of the shared serving certificate.
type Options struct {
	// Secret is namespace/name; empty disables the controller.
	Secret string
	// Service is namespace/name of the Service the APIService points at.
	Service         string
	APIServiceNames []string
	CAValidity      time.Duration
	Validity        time.Duration
	RenewFraction   float64
}

func NewOptions() *Options {
	return &Options{
		Service:         "event-apiserver/event-apiserver",
		APIServiceNames: []string{"v1.events.k8s.io", "v1alpha1.history.eventapiserver.io"},
		CAValidity:      DefaultCAValidity,
		Validity:        DefaultValidity,
		RenewFraction:   DefaultRenewFraction,
	}
}

func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Secret, "serving-cert-secret", o.Secret,
		"namespace/name of a Secret that holds the serving certificate shared by all replicas, with its CA. "+
			"Created when missing and renewed before expiry by whichever replica gets there first; the CA "+
			"is put into the caBundle of --apiservice-names. Instead of --tls-cert-file.")
	fs.StringVar(&o.Service, "serving-cert-service", o.Service,
		"namespace/name of the Service the APIService points at: the certificate is issued for "+
			"<name>.<namespace>.svc and <name>.<namespace>.svc.cluster.local.")
	fs.StringSliceVar(&o.APIServiceNames, "apiservice-names", o.APIServiceNames,
		"APIServices whose caBundle is kept trusting the certificate of --serving-cert-secret.")
	fs.DurationVar(&o.CAValidity, "serving-cert-ca-validity", o.CAValidity,
		"Lifetime of the CA made for --serving-cert-secret.")
	fs.DurationVar(&o.Validity, "serving-cert-validity", o.Validity,
		"Lifetime of the serving certificate made for --serving-cert-secret.")
	fs.Float64Var(&o.RenewFraction, "serving-cert-renew-fraction", o.RenewFraction,
		"Share of a certificate's lifetime after which it is renewed (CA and serving certificate alike).")
}

// Enabled reports whether the server takes its certificate from the Secret.
func (o *Options) Enabled() bool { return o.Secret != "" }

func (o *Options) Validate() []error {
	if !o.Enabled() {
		return nil
	}
	var errs []error
	for flag, v := range map[string]string{"--serving-cert-secret": o.Secret, "--serving-cert-service": o.Service} {
		if _, _, err := splitRef(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
		}
	}
	if o.Validity < 10*time.Second {
		errs = append(errs, fmt.Errorf("--serving-cert-validity must be at least 10s"))
	}
	if o.CAValidity < o.Validity {
		errs = append(errs, fmt.Errorf("--serving-cert-ca-validity must be at least --serving-cert-validity"))
	}
	if o.RenewFraction <= 0 || o.RenewFraction >= 1 {
		errs = append(errs, fmt.Errorf("--serving-cert-renew-fraction must be between 0 and 1"))
	}
	for _, name := range o.APIServiceNames {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--apiservice-names: %q: %s", name, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// Policy is the certificate the options ask for.
func (o *Options) Policy() Policy {
	ns, name, _ := splitRef(o.Service)
	svc := name + "." + ns + ".svc"
	return Policy{
		DNSNames:      []string{svc, svc + ".cluster.local"},
		CAValidity:    o.CAValidity,
		Validity:      o.Validity,
		RenewFraction: o.RenewFraction,
	}
}

// Resync is how often each replica reads the Secret: a twentieth of the
// time between renewal and expiry, so a renewal by one replica reaches the
// others long before the old certificate expires, and at most a minute.
func (o *Options) Resync() time.Duration {
	r := time.Duration(float64(o.Validity) * (1 - o.RenewFraction) / 20)
	return min(max(r, time.Second), maxResync)
}

// SecretRef is the Secret's namespace and name.
func (o *Options) SecretRef() (namespace, name string) {
	namespace, name, _ = splitRef(o.Secret)
	return namespace, name
}

func splitRef(ref string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", fmt.Errorf("%q is not namespace/name", ref)
	}
	for _, part := range []string{namespace, name} {
		if msgs := validation.IsDNS1123Subdomain(part); len(msgs) > 0 {
			return "", "", fmt.Errorf("%q: %s", part, strings.Join(msgs, "; "))
		}
	}
	return namespace, name, nil
}

// DependentFlags only mean something with --serving-cert-secret; the
// command refuses them without it.
var DependentFlags = []string{"serving-cert-service", "apiservice-names", "serving-cert-ca-validity",
	"serving-cert-validity", "serving-cert-renew-fraction"}
