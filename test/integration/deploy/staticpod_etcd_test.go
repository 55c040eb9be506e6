package deploy

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestStaticPodEventsEtcdTrust runs the command of
// deploy/static-pods/events-etcd.yaml, filled in as docs/aggregated.md fills
// it for one node, over a kubeadm-like PKI (its etcd CA, the etcd server
// and peer certificates with the node's names, kube-apiserver's etcd client
// certificate) and the client CA bundle the guide builds, and checks the
// trust design: kube-apiserver, with only --etcd-servers-overrides added to
// its usual etcd flags, stores core/v1 Events there; event-apiserver, with
// the events-etcd-client certificate and kubeadm's CA as --etcd-cafile,
// reads them; and an etcd that trusts kubeadm's CA only, as the main etcd
// does, refuses event-apiserver's certificate. The paths under
// /etc/kubernetes and /var/lib are moved to a temporary directory and the
// ports to free ones (the rewrites).
func TestStaticPodEventsEtcdTrust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const nodeName, nodeIP = "cp-1", "127.0.0.51"
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "deploy/static-pods/events-etcd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	filled := strings.NewReplacer("INITIAL_CLUSTER", nodeName+"=https://"+nodeIP+":2383",
		"NODE_NAME", nodeName, "NODE_IP", nodeIP).Replace(string(manifest))
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(filled), &pod); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	kubeadmPKI := filepath.Join(dir, "etc/kubernetes/pki/etcd")
	eventsPKI := filepath.Join(dir, "etc/kubernetes/pki/events-etcd")
	for _, d := range []string{kubeadmPKI, eventsPKI} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	write := func(path string, data []byte) string {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	issue := func(ca *servingcert.KeyPair, leaf servingcert.Leaf, dir, name string) (certFile, keyFile string) {
		t.Helper()
		kp, err := ca.Issue(leaf, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return write(filepath.Join(dir, name+".crt"), kp.CertPEM), write(filepath.Join(dir, name+".key"), kp.KeyPEM)
	}
	// kubeadm's etcd PKI: names and usages as kubeadm init phase certs
	// etcd-* gives them.
	etcdCA, err := servingcert.NewCA("etcd-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	etcdCAFile := write(filepath.Join(kubeadmPKI, "ca.crt"), etcdCA.CertPEM)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	nodeNames := servingcert.Leaf{CommonName: nodeName, DNSNames: []string{nodeName, "localhost"},
		IPs: []net.IP{net.ParseIP(nodeIP), net.IPv4(127, 0, 0, 1), net.IPv6loopback}, Usages: both}
	issue(etcdCA, nodeNames, kubeadmPKI, "server")
	issue(etcdCA, nodeNames, kubeadmPKI, "peer")
	apiserverCert, apiserverKey := issue(etcdCA, servingcert.Leaf{CommonName: "kube-apiserver-etcd-client",
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, dir, "apiserver-etcd-client")
	// events-etcd-ca and event-apiserver's client certificate, as the certs
	// Job makes them.
	eventsCA, err := servingcert.NewCA("events-etcd-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	eventCert, eventKey := issue(eventsCA, servingcert.Leaf{CommonName: "event-apiserver",
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, dir, "events-etcd-client")
	// The guide's client-ca.crt: kubeadm's etcd CA, then events-etcd-ca.
	write(filepath.Join(eventsPKI, "client-ca.crt"), append(append([]byte(nil), etcdCA.CertPEM...), eventsCA.CertPEM...))

	// The manifest's ports are fixed (2382-2384); here they are free ones,
	// so that the test runs beside anything else on this machine.
	clientPort, peerPort, metricsPort := strconv.Itoa(framework.FreePort(t)), strconv.Itoa(framework.FreePort(t)), strconv.Itoa(framework.FreePort(t))
	relocate := strings.NewReplacer("/etc/kubernetes/", filepath.Join(dir, "etc/kubernetes")+"/",
		"/var/lib/events-etcd", filepath.Join(dir, "var/lib/events-etcd"),
		":2382", ":"+clientPort, ":2383", ":"+peerPort, ":2384", ":"+metricsPort)
	c := pod.Spec.Containers[0]
	var args []string
	for _, a := range append(append([]string(nil), c.Command[1:]...), c.Args...) {
		args = append(args, relocate.Replace(a))
	}
	runEtcd := func(name string, args []string) {
		t.Helper()
		p := &testbed.Process{Name: name, Path: framework.EtcdBinary(t), Args: args, LogPath: filepath.Join(dir, name+".log")}
		t.Cleanup(func() { _ = p.Stop() })
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	runEtcd("events-etcd", args)
	eventsEtcd := "https://127.0.0.1:" + clientPort
	// kube-apiserver's own etcd TLS flags, unchanged but for the override.
	tlsFlags := []string{"--etcd-cafile=" + etcdCAFile, "--etcd-certfile=" + apiserverCert, "--etcd-keyfile=" + apiserverKey}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return etcdAnswers(ctx, eventsEtcd, etcdCAFile, apiserverCert, apiserverKey) == nil, nil
	}); err != nil {
		t.Fatalf("the static pod's etcd never answered kube-apiserver's client certificate on %s: %v\n%s", eventsEtcd,
			etcdAnswers(ctx, eventsEtcd, etcdCAFile, apiserverCert, apiserverKey), readFileOr(filepath.Join(dir, "events-etcd.log")))
	}

	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		EtcdServersOverrides: "/events#" + eventsEtcd,
		ExtraFlags:           tlsFlags,
	})
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: eventsEtcd,
		ExtraArgs:   []string{"--etcd-cafile=" + etcdCAFile, "--etcd-certfile=" + eventCert, "--etcd-keyfile=" + eventKey},
	})
	ns := framework.UniqueName("static")
	if _, err := kube.Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Client(t).CoreV1().Events(ns).Create(ctx, framework.RecorderStyleCoreEvent(ns, "through-kube"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := server.Client(t).EventsV1().Events(ns).Get(ctx, "through-kube", metav1.GetOptions{}); err != nil {
		t.Fatalf("a core/v1 Event kube-apiserver wrote through the override is not read by event-apiserver: %v", err)
	}

	t.Run("event-apiserver as components/static-pod-etcd configures it", func(t *testing.T) {
		// The aggregated overlay with the component, its objects applied and
		// its container run by the kubelet-less runner, with the ConfigMap
		// and the Secret of the guide's steps 2 and 5.
		objs := framework.SplitManifests(t, renderWithComponents(t, "overlays/aggregated", "static-pod-etcd"))
		c := &deployedCluster{kube: kube, client: kube.Client(t)}
		c.apply(t, objs)
		caData, err := os.ReadFile(etcdCAFile)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.CoreV1().ConfigMaps(deployNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "events-etcd-static"},
			Data:       map[string]string{"servers": "https://" + nodeIP + ":" + clientPort, "ca.crt": string(caData)},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		secret := map[string][]byte{"ca.crt": eventsCA.CertPEM}
		for key, file := range map[string]string{"tls.crt": eventCert, "tls.key": eventKey} {
			if secret[key], err = os.ReadFile(file); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.client.CoreV1().Secrets(deployNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "events-etcd-client"}, Data: secret,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kubelet := framework.NewKubelet(t, kube, map[string]string{"/event-apiserver": framework.ServerBinary(t)},
			framework.WriteHostsFile(t, map[string][]string{}))
		deploy := &appsv1.Deployment{}
		framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
		replica, err := kubelet.RunPod(ctx, "event-apiserver-0", deployNamespace, "127.0.0.52", deploy.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		if err := replica.WaitReady(ctx, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		// The readiness probe leaves etcd out, so the full /readyz (its etcd
		// checks answered by the static pod's etcd) may pass a moment later:
		// the storage clients connect in the background, as kube-apiserver's.
		// (Anonymous callers may read /readyz, not /readyz/<check>, as on
		// kube-apiserver.)
		var code int
		var getErr error
		if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			code, getErr = replica.AnonymousGet(ctx, "https", 6443, "/readyz")
			return getErr == nil && code == http.StatusOK, nil
		}); err != nil {
			t.Errorf("/readyz on the replica over the static-pod etcd: last %d %v (%v)\n%s", code, getErr, err, replica.Log())
		}
	})

	// The main etcd trusts kubeadm's CA only: event-apiserver's certificate
	// must not open it. Same command, its own ports, trusting etcd/ca.crt.
	mainClient, mainPeer, mainMetrics := strconv.Itoa(framework.FreePort(t)), strconv.Itoa(framework.FreePort(t)), strconv.Itoa(framework.FreePort(t))
	mainPorts := strings.NewReplacer(":"+clientPort, ":"+mainClient, ":"+peerPort, ":"+mainPeer, ":"+metricsPort, ":"+mainMetrics,
		filepath.Join(dir, "var/lib/events-etcd"), filepath.Join(dir, "var/lib/etcd"))
	mainArgs := make([]string, 0, len(args))
	for _, a := range args {
		a = mainPorts.Replace(a)
		if strings.HasPrefix(a, "--trusted-ca-file=") {
			a = "--trusted-ca-file=" + etcdCAFile
		}
		mainArgs = append(mainArgs, a)
	}
	runEtcd("main-etcd", mainArgs)
	mainEtcd := "https://127.0.0.1:" + mainClient
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return etcdAnswers(ctx, mainEtcd, etcdCAFile, apiserverCert, apiserverKey) == nil, nil
	}); err != nil {
		t.Fatalf("the main-like etcd never answered kube-apiserver's client certificate: %v", err)
	}
	if err := etcdAnswers(ctx, mainEtcd, etcdCAFile, eventCert, eventKey); err == nil {
		t.Errorf("an etcd trusting kubeadm's etcd CA only accepts event-apiserver's events-etcd-client certificate")
	} else if log := readFileOr(filepath.Join(dir, "main-etcd.log")); !strings.Contains(log, "certificate signed by unknown authority") {
		// Refused for the certificate, not for anything else.
		t.Errorf("the main-like etcd did not say why it refused event-apiserver's certificate (%v):\n%s", err, log)
	} else {
		t.Logf("the main-like etcd refuses event-apiserver's certificate (unknown authority): %v", err)
	}
}

// etcdAnswers reads one key from endpoint with a client certificate.
func etcdAnswers(ctx context.Context, endpoint, caFile, certFile, keyFile string) error {
	tlsConfig, err := (transport.TLSInfo{TrustedCAFile: caFile, CertFile: certFile, KeyFile: keyFile}).ClientConfig()
	if err != nil {
		return err
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConfig, DialTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = client.Get(ctx, "/health-of-the-test")
	return err
}

func readFileOr(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(data)
}
