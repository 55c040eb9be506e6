package testbed

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
)

// NjsModule is Debian's libnginx-mod-http-js, which deploy/door/nginx.conf
// loads.
const NjsModule = "/usr/lib/nginx/modules/ngx_http_js_module.so"

// ErrNoNginx is returned by NginxBinary when nginx or its njs module is
// not installed (hack/install-test-packages.sh installs both).
var ErrNoNginx = errors.New("nginx with the njs module is not installed: run hack/install-test-packages.sh")

// NginxBinary is Debian's nginx, with the njs module beside it.
func NginxBinary() (string, error) {
	path, err := exec.LookPath("nginx")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/nginx"); statErr != nil {
			return "", fmt.Errorf("%w (%v)", ErrNoNginx, err)
		}
		path = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(NjsModule); err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoNginx, err)
	}
	return path, nil
}

// DoorOptions configures StartDoor.
type DoorOptions struct {
	// Binary is nginx (NginxBinary).
	Binary string
	// Dir holds the filled configuration, the logs and the CA bundle; it
	// is created.
	Dir string
	// Kube is the kube-apiserver behind the door; its serving certificate
	// is the door's, and its client CA verifies clients.
	Kube *KubeAPIServer
	// Events are the event-apiserver replicas (aggregated) behind it, and
	// EventsName the name their serving certificates carry. None is for
	// WithoutEventRoutes only.
	Events     []*Server
	EventsName string
	// FrontProxyCert and FrontProxyKey are the door's front-proxy client
	// certificate (IssueClientCert with Kube's front-proxy CA).
	FrontProxyCert, FrontProxyKey string
	// WithoutEventRoutes removes the Event locations, the rollback
	// docs/front-door.md describes: every request goes to kube-apiserver.
	WithoutEventRoutes bool
}

// Door is nginx running deploy/door/nginx.conf.
type Door struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// AccessLog is the file of log_format door.
	AccessLog string
	// ErrorLog is nginx's error log.
	ErrorLog string

	proc *Process
}

// Process is nginx's master process.
func (d *Door) Process() *Process { return d.proc }

var doorPlaceholder = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// eventLocation matches the configuration's Event locations, up to their
// closing brace.
var eventLocation = regexp.MustCompile(`(?m)^ *location ~ \^/api(s/events|/v1/\(watch)[^\n]*\{\n(?:[^\n]*\n)*? *\}\n`)

// withoutEventRoutes is the door's configuration with its two Event
// locations removed.
func withoutEventRoutes(conf []byte) ([]byte, error) {
	if n := len(eventLocation.FindAllIndex(conf, -1)); n != 2 {
		return nil, fmt.Errorf("deploy/door/nginx.conf: found %d Event locations, want 2", n)
	}
	return eventLocation.ReplaceAll(conf, nil), nil
}

// StartDoor fills deploy/door/nginx.conf as an operator would, starts
// nginx with it on a free loopback port and waits until kube-apiserver's
// /readyz answers through it.
func StartDoor(ctx context.Context, o DoorOptions) (*Door, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	template, err := os.ReadFile(filepath.Join(root, "deploy", "door", "nginx.conf"))
	if err != nil {
		return nil, err
	}
	if o.WithoutEventRoutes {
		if template, err = withoutEventRoutes(template); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	var eventCAs []byte
	var eventServers []string
	for _, e := range o.Events {
		ca, err := os.ReadFile(e.CACertFile())
		if err != nil {
			return nil, err
		}
		eventCAs = append(eventCAs, ca...)
		eventServers = append(eventServers, fmt.Sprintf("server 127.0.0.1:%d max_fails=1 fail_timeout=10s;", e.Port))
	}
	if len(eventServers) == 0 {
		// An upstream needs a server; with no replicas (the rollback
		// configuration, whose Event routes are gone) one that is down.
		eventServers = append(eventServers, "server 127.0.0.1:1 down;")
	}
	eventCAFile := filepath.Join(o.Dir, "event-apiserver-ca.crt")
	if err := os.WriteFile(eventCAFile, eventCAs, 0o600); err != nil {
		return nil, err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	d := &Door{
		URL:       fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		AccessLog: filepath.Join(o.Dir, "access.log"),
		ErrorLog:  filepath.Join(o.Dir, "error.log"),
	}
	values := map[string]string{
		"DOOR_JS":         filepath.Join(root, "deploy", "door", "door.js"),
		"DOOR_ACCESS_LOG": d.AccessLog,
		"DOOR_LISTEN":     fmt.Sprintf("127.0.0.1:%d", ports[0]),
		// kube-apiserver's own certificate, so kubeconfigs stay as they are.
		"DOOR_CERT":            o.Kube.ServingCertFile,
		"DOOR_KEY":             o.Kube.ServingKeyFile,
		"CLUSTER_CLIENT_CA":    o.Kube.ClientCAFile,
		"FRONT_PROXY_CERT":     o.FrontProxyCert,
		"FRONT_PROXY_KEY":      o.FrontProxyKey,
		"KUBE_APISERVERS":      fmt.Sprintf("server 127.0.0.1:%d max_fails=1 fail_timeout=10s;", o.Kube.Port),
		"KUBE_APISERVER_NAME":  "kubernetes.default.svc",
		"KUBE_APISERVER_CA":    o.Kube.CAFile,
		"EVENT_APISERVERS":     strings.Join(eventServers, " "),
		"EVENT_APISERVER_NAME": o.EventsName,
		"EVENT_APISERVER_CA":   eventCAFile,
	}
	var missing []string
	conf := doorPlaceholder.ReplaceAllStringFunc(string(template), func(m string) string {
		v, ok := values[m[2:len(m)-1]]
		if !ok {
			missing = append(missing, m)
		}
		return v
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("deploy/door/nginx.conf has placeholders StartDoor does not fill: %v", missing)
	}
	confFile := filepath.Join(o.Dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// Workers run as root: they read the front-proxy key per connection,
	// and the test's files are root's alone.
	d.proc = &Process{
		Name: "nginx", Path: o.Binary, LogPath: filepath.Join(o.Dir, "nginx.log"),
		Args: []string{"-p", o.Dir, "-c", confFile, "-e", d.ErrorLog,
			"-g", "daemon off; user root; pid " + filepath.Join(o.Dir, "nginx.pid") + ";"},
	}
	if err := d.proc.Start(); err != nil {
		return nil, err
	}
	// With the admin token: a kube-apiserver with --authorization-mode=
	// AlwaysAllow (the benchmark's) refuses anonymous requests.
	client, err := httpClientFor(&rest.Config{Host: d.URL, BearerToken: o.Kube.AdminToken, TLSClientConfig: rest.TLSClientConfig{CAData: o.Kube.CAData}})
	if err != nil {
		_ = d.proc.Stop()
		return nil, err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = d.proc.Poll(ctx, readyInterval, func() error { return getOK(ctx, client, d.URL+"/readyz") })
	if err != nil {
		errLog, _ := os.ReadFile(d.ErrorLog)
		_ = d.proc.Stop()
		return nil, fmt.Errorf("nginx did not come up: %w\n%s\n%s", err, d.proc.Tail(logTailLines), errLog)
	}
	return d, nil
}

// IssueClientCert signs a client certificate (CN cn, O orgs) with the CA
// in caCert/caKey and writes it and its key into dir.
func IssueClientCert(caCert, caKey, dir, cn string, orgs ...string) (certFile, keyFile string, err error) {
	certPEM, err := os.ReadFile(caCert)
	if err != nil {
		return "", "", err
	}
	keyPEM, err := os.ReadFile(caKey)
	if err != nil {
		return "", "", err
	}
	ca, err := servingcert.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return "", "", err
	}
	return WriteClientCert(ca, dir, cn, orgs...)
}

// WriteClientCert signs a client certificate with ca and writes it and its
// key into dir as client.crt and client.key.
func WriteClientCert(ca *servingcert.KeyPair, dir, cn string, orgs ...string) (certFile, keyFile string, err error) {
	kp, err := ca.Issue(servingcert.Leaf{CommonName: cn, Organization: orgs, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		time.Now(), pkiValidity)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, kp.CertPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, kp.KeyPEM, 0o600)
}
