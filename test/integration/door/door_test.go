package door

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

const (
	// doorProxyName is the CN of the door's front-proxy client
	// certificate, added to kube-apiserver's --requestheader-allowed-names.
	doorProxyName = "event-door"
	doorNamespace = "door"
)

// The door cluster's storm budgets: small, so that one node's storm is
// refused within a few dozen writes.
const (
	doorReporterBurst = 5
	doorUserBurst     = 20
)

// nginxBinary is Debian's nginx with the njs module, installed by
// hack/install-test-packages.sh; the test skips without them, except
// under CI where that script has run.
func nginxBinary(t *testing.T) string {
	t.Helper()
	path, err := testbed.NginxBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return path
}

// frontDoor is nginx running deploy/door/nginx.conf on a loopback port.
type frontDoor struct {
	*testbed.Door
}

// startFrontDoor fills deploy/door/nginx.conf as an operator would and
// starts nginx with it; it is stopped when the test ends.
func startFrontDoor(t *testing.T, kube *framework.KubeAPIServer, replicas []*framework.Server, proxyCert, proxyKey string) *frontDoor {
	t.Helper()
	var events []*testbed.Server
	for _, r := range replicas {
		events = append(events, r.Server)
	}
	d, err := testbed.StartDoor(context.Background(), testbed.DoorOptions{
		Binary: nginxBinary(t), Dir: t.TempDir(), Kube: kube.KubeAPIServer, Events: events, EventsName: framework.AggregatedServiceDNS,
		FrontProxyCert: proxyCert, FrontProxyKey: proxyKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Process().Stop() })
	return &frontDoor{Door: d}
}

func certPool(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in CA bundle")
	}
	return pool
}

// doorLogLine is one line of the door's access log (log_format door).
type doorLogLine struct {
	user, method, uri, status string
	// upstream answered; tried lists the servers that failed before it.
	upstream, tried string
}

func (d *frontDoor) log(t *testing.T) []doorLogLine {
	t.Helper()
	data, err := os.ReadFile(d.AccessLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var lines []doorLogLine
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	// $upstream_addr lists every server tried, the last one answered.
	re := regexp.MustCompile(`^\S+ (\S*) "(\S+) (\S+)" (\d+) ((?:\S+, )*)(\S+) \S+$`)
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("access log line not in log_format door: %q", sc.Text())
		}
		lines = append(lines, doorLogLine{user: m[1], method: m[2], uri: m[3], status: m[4], tried: strings.TrimSuffix(m[5], ", "), upstream: m[6]})
	}
	return lines
}

// upstreamOf waits for the request for uri (path and query) to be logged
// and says where the door sent it.
func (d *frontDoor) upstreamOf(t *testing.T, uri string) string {
	t.Helper()
	var upstream string
	err := wait.PollUntilContextTimeout(context.Background(), framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		for _, l := range d.log(t) {
			if l.uri == uri {
				upstream = l.upstream
			}
		}
		return upstream != "", nil
	})
	if err != nil {
		t.Fatalf("the door never logged %s", uri)
	}
	return upstream
}

// issueCert signs a client certificate with the CA in caCert/caKey.
func issueCert(t *testing.T, caCert, caKey, cn string, orgs ...string) (string, string) {
	t.Helper()
	certFile, keyFile, err := testbed.IssueClientCert(caCert, caKey, t.TempDir(), cn, orgs...)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// doorClient is how a client reaches the door: the cluster's serving CA
// (the door serves kube-apiserver's certificate) and a certificate or a
// token.
type doorClient struct {
	name              string
	certFile, keyFile string
	token             string
}

func (c doorClient) config(d *frontDoor, kube *framework.KubeAPIServer) *rest.Config {
	return &rest.Config{
		Host:            d.URL,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: kube.CAData, CertFile: c.certFile, KeyFile: c.keyFile},
		QPS:             100, Burst: 200,
	}
}

func (c doorClient) clientset(t *testing.T, d *frontDoor, kube *framework.KubeAPIServer) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.config(d, kube))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// kubeconfig is the file kubectl gets: the door's URL where
// kube-apiserver's was, nothing else changed.
func (c doorClient) kubeconfig(t *testing.T, d *frontDoor, kube *framework.KubeAPIServer) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: d.URL, CertificateAuthorityData: kube.CAData}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: c.certFile, ClientKey: c.keyFile, Token: c.token}
	cfg.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	cfg.CurrentContext = "ctx"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawGet sends one request through the door with extra headers, for what
// client-go would not send.
func (c doorClient) rawGet(t *testing.T, d *frontDoor, kube *framework.KubeAPIServer, path string, headers map[string]string) (int, string) {
	t.Helper()
	transport, err := rest.TransportFor(c.config(d, kube))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, d.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Add(k, v)
	}
	resp, err := (&http.Client{Transport: transport, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestFrontDoor runs deploy/door/nginx.conf in front of a real
// kube-apiserver v1.36.3 and two aggregated event-apiserver replicas that
// share its events etcd, and checks with unchanged clients (client-go's
// recorder as a kubelet, kubectl as an admin and as a service account)
// that every Event request reaches event-apiserver and nothing else does,
// that identity cannot be forged through the door, that one node's storm
// is refused per node, that a client bypassing the door sees the same
// Events, and that a watch outlives a replica.
func TestFrontDoor(t *testing.T) {
	t.Parallel()
	nginxBinary(t)
	ctx := context.Background()
	// Bypassing clients reach event-apiserver's events.k8s.io/v1 through
	// kube-apiserver's aggregator, as docs/aggregated.md installs it.
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{
		Replicas: 2,
		// Appended to front-proxy-client (a list flag).
		KubeFlags: []string{"--requestheader-allowed-names=" + doorProxyName},
		ServerArgs: []string{
			// Slow refills, so that a slow machine's storm is still
			// refused within its few dozen writes.
			"--event-rate-limit-qps=0.1", fmt.Sprintf("--event-rate-limit-burst=%d", doorReporterBurst),
			"--event-rate-limit-user-qps=0.2", fmt.Sprintf("--event-rate-limit-user-burst=%d", doorUserBurst),
		},
	})
	kube, replicas := c.Kube, c.Replicas
	c.CreateNamespace(t, doorNamespace)

	proxyCert, proxyKey := issueCert(t, kube.FrontProxyCAFile, kube.FrontProxyCAKeyFile, doorProxyName)
	door := startFrontDoor(t, kube, replicas, proxyCert, proxyKey)
	eventUpstreams := map[string]bool{}
	for _, r := range replicas {
		eventUpstreams[fmt.Sprintf("127.0.0.1:%d", r.Port)] = true
	}
	kubeUpstream := fmt.Sprintf("127.0.0.1:%d", kube.Port)

	// Identities.
	admin := doorClient{name: "admin certificate", certFile: kube.AdminClientCertFile, keyFile: kube.AdminClientKeyFile}
	node := func(name string) doorClient {
		cert, key := issueCert(t, kube.ClientCAFile, kube.ClientCAKeyFile, "system:node:"+name, "system:nodes")
		return doorClient{name: name, certFile: cert, keyFile: key}
	}
	n1 := node("n1")
	grantDoorRBAC(t, c.Client)
	saToken, err := c.Client.CoreV1().ServiceAccounts(doorNamespace).CreateToken(ctx, "event-reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serviceAccount := doorClient{name: "service-account token", token: saToken.Status.Token}

	cm, err := c.Client.CoreV1().ConfigMaps(doorNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeEventRequests := func() float64 {
		return framework.MetricValue(t, kube.RestConfig(), "apiserver_request_total", map[string]string{"resource": "events"})
	}
	eventAPIServerRequests := func() float64 {
		var sum float64
		for _, r := range replicas {
			config := admin.config(&frontDoor{Door: &testbed.Door{URL: r.URL}}, kube)
			config.TLSClientConfig.CAData, config.TLSClientConfig.CAFile = nil, r.CACertFile()
			sum += framework.MetricValue(t, config, "apiserver_request_total", map[string]string{"resource": "events"})
		}
		return sum
	}
	doorEventRequests := func() int {
		n := 0
		for _, l := range door.log(t) {
			if eventUpstreams[l.upstream] {
				n++
			}
		}
		return n
	}
	kubeBefore, eventsBefore := kubeEventRequests(), eventAPIServerRequests()
	t.Logf("before the door's traffic: kube-apiserver counted %.0f Event requests, event-apiserver %.0f (the setup's, through the aggregator)",
		kubeBefore, eventsBefore)

	t.Run("routes", func(t *testing.T) {
		for _, tc := range []struct {
			uri    string
			events bool
		}{
			{"/api/v1/events?limit=1", true},
			{"/api/v1/namespaces/door/events?limit=1", true},
			{"/api/v1/namespaces/door/events/route-check", true},
			{"/api/v1/watch/events?timeoutSeconds=1", true},
			{"/api/v1/watch/namespaces/door/events?timeoutSeconds=1", true},
			{"/api/v1/watch/namespaces/door/events/route-check?timeoutSeconds=1", true},
			{"/apis/events.k8s.io/v1/namespaces/door/events?limit=1", true},
			{"/apis/events.k8s.io/v1/watch/events?timeoutSeconds=1", true},
			{"/api", false},
			{"/api/v1", false},
			{"/apis", false},
			{"/apis/events.k8s.io", false},
			{"/openapi/v2?timeout=32s", false},
			{"/openapi/v3", false},
			{"/api/v1/namespaces/events", false}, // the namespace called "events"
			{"/api/v1/namespaces/door/configmaps", false},
			{"/api/v1/watch/namespaces/door/configmaps?timeoutSeconds=1", false},
			{"/api/v1/namespaces/door/configmaps?watch=true&timeoutSeconds=1", false},
			{"/api/v1/namespaces/door/events-like/x", false},
			{"/version", false},
		} {
			status, body := admin.rawGet(t, door, kube, tc.uri, nil)
			if status >= 500 {
				t.Errorf("%s: %d %s", tc.uri, status, body)
			}
			upstream := door.upstreamOf(t, tc.uri)
			if got := eventUpstreams[upstream]; got != tc.events || (!tc.events && upstream != kubeUpstream) {
				t.Errorf("%s went to %s; want event-apiserver: %v", tc.uri, upstream, tc.events)
			}
		}
	})

	t.Run("upgrades pass through the door", func(t *testing.T) {
		// A watch over WebSocket is the upgrade both servers serve with no
		// kubelet; exec, attach and port-forward upgrade the same way.
		for _, tc := range []struct {
			resource string
			create   func(name string) error
			events   bool
		}{
			{"configmaps", func(name string) error {
				_, err := c.Client.CoreV1().ConfigMaps(doorNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return err
			}, false},
			{"events", func(name string) error {
				_, err := admin.clientset(t, door, kube).CoreV1().Events(doorNamespace).Create(ctx, framework.RecorderStyleCoreEvent(doorNamespace, name), metav1.CreateOptions{})
				return err
			}, true},
		} {
			name := framework.UniqueName("upgrade")
			uri := fmt.Sprintf("/api/v1/namespaces/%s/%s?watch=true&fieldSelector=metadata.name%%3D%s", doorNamespace, tc.resource, name)
			frame := webSocketWatchFirstFrame(t, door, kube, admin, uri, func() error { return tc.create(name) })
			if !strings.Contains(frame, `"type":"ADDED"`) || !strings.Contains(frame, name) {
				t.Errorf("%s: first WebSocket frame %q", tc.resource, frame)
			}
			if upstream := door.upstreamOf(t, uri); eventUpstreams[upstream] != tc.events {
				t.Errorf("the WebSocket watch of %s went to %s", tc.resource, upstream)
			}
		}
	})

	t.Run("readyz of each replica answers the door's health checks", func(t *testing.T) {
		for _, r := range replicas {
			status, body := (&framework.AggregatedCluster{Events: r}).AnonymousGet(t, "/readyz")
			if status != http.StatusOK {
				t.Errorf("%s/readyz anonymously: %d %s", r.URL, status, body)
			}
		}
	})

	var recorded []string
	t.Run("kubelet recorder writes, then patches", func(t *testing.T) {
		var mu sync.Mutex
		var calls []string
		config := n1.config(door, kube)
		config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(req)
				if err == nil {
					mu.Lock()
					calls = append(calls, fmt.Sprintf("%s %d", req.Method, resp.StatusCode))
					mu.Unlock()
				}
				return resp, err
			})
		})
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		broadcaster := record.NewBroadcaster()
		defer broadcaster.Shutdown()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "n1"})
		for _, reason := range []string{"DoorFirst", "DoorSecond"} {
			recorder.Eventf(cm, corev1.EventTypeWarning, reason, "seen through the door")
			recorder.Eventf(cm, corev1.EventTypeWarning, reason, "seen through the door")
		}
		err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			list, err := admin.clientset(t, door, kube).CoreV1().Events(doorNamespace).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=settings,source=kubelet"})
			if err != nil {
				return false, err
			}
			recorded = recorded[:0]
			for _, e := range list.Items {
				if e.Count == 2 && e.Source.Host == "n1" {
					recorded = append(recorded, e.Name)
				}
			}
			return len(recorded) == 2, nil
		})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Fatalf("the recorder's Events did not reach count 2: %v; calls %v", err, calls)
		}
		if strings.Join(calls, ",") != "POST 201,PATCH 200,POST 201,PATCH 200" {
			t.Errorf("recorder calls through the door: %v, want two POSTs and two PATCHes", calls)
		}
		for _, l := range door.log(t) {
			if l.user == "system:node:n1" && !eventUpstreams[l.upstream] {
				t.Errorf("the kubelet's %s %s went to %s", l.method, l.uri, l.upstream)
			}
		}
	})

	for _, who := range []doorClient{admin, serviceAccount} {
		t.Run("kubectl with "+who.name, func(t *testing.T) {
			testKubectlThroughDoor(t, framework.KubectlBinary(t), who.kubeconfig(t, door, kube), strings.ReplaceAll(who.name, " ", "-"), cm)
		})
	}

	t.Run("forged identity gains nothing", func(t *testing.T) {
		forged := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
		for _, who := range []doorClient{n1, serviceAccount} {
			for _, path := range []string{"/apis/rbac.authorization.k8s.io/v1/clusterroles", "/api/v1/namespaces/kube-system/events"} {
				status, body := who.rawGet(t, door, kube, path, forged)
				if status != http.StatusForbidden || !strings.Contains(body, "X-Remote-") {
					t.Errorf("%s with X-Remote-User admin on %s: %d %s, want the door's 403", who.name, path, status, body)
				}
			}
			if status, body := who.rawGet(t, door, kube, "/api/v1/namespaces/door/events", map[string]string{"x-remote-extra-scopes": "all"}); status != http.StatusForbidden {
				t.Errorf("%s with X-Remote-Extra-Scopes: %d %s, want 403", who.name, status, body)
			}
			// Without the forged headers, the same identity is its own.
			if status, body := who.rawGet(t, door, kube, "/apis/rbac.authorization.k8s.io/v1/clusterroles", nil); status != http.StatusForbidden {
				t.Errorf("%s listing cluster roles: %d %s, want 403 from kube-apiserver", who.name, status, body)
			}
		}
		// A certificate the cluster CA did not sign is refused by the
		// door, never passed on as an identity.
		foreignCA, err := servingcert.NewCA("not-the-cluster-ca", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, key, err := testbed.WriteClientCert(foreignCA, t.TempDir(), "admin", "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		forger := doorClient{name: "foreign certificate", certFile: cert, keyFile: key}
		if status, body := forger.rawGet(t, door, kube, "/apis/rbac.authorization.k8s.io/v1/clusterroles", nil); status != http.StatusBadRequest {
			t.Errorf("a certificate from another CA: %d %s, want nginx's 400", status, body)
		}
		// Each O is one X-Remote-Group, as kube-apiserver reads the
		// certificate itself.
		// A comma and UTF-8, which nginx's subject escapes.
		cert, key = issueCert(t, kube.ClientCAFile, kube.ClientCAKeyFile, "carol", "team-a", "team-b", "team,c", "équipe")
		carol := doorClient{name: "carol", certFile: cert, keyFile: key}
		review, err := carol.clientset(t, door, kube).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := review.Status.UserInfo
		groups := append([]string(nil), got.Groups...)
		sort.Strings(groups)
		if got.Username != "carol" || strings.Join(groups, "|") != "system:authenticated|team,c|team-a|team-b|équipe" {
			t.Errorf("carol through the door is %q in %q", got.Username, got.Groups)
		}
		// kube-apiserver reading the same certificate itself.
		straight := carol.config(door, kube)
		straight.Host = kube.URL
		straightClient, err := kubernetes.NewForConfig(straight)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := straightClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		directGroups := append([]string(nil), direct.Status.UserInfo.Groups...)
		sort.Strings(directGroups)
		if direct.Status.UserInfo.Username != got.Username || strings.Join(directGroups, "|") != strings.Join(groups, "|") ||
			!reflect.DeepEqual(direct.Status.UserInfo.Extra, got.Extra) || len(got.Extra) == 0 {
			t.Errorf("carol straight to kube-apiserver is %+v, through the door %+v", direct.Status.UserInfo, got)
		}
		cert, key = issueCert(t, kube.ClientCAFile, kube.ClientCAKeyFile, "dave", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9")
		dave := doorClient{name: "dave", certFile: cert, keyFile: key}
		if status, body := dave.rawGet(t, door, kube, "/api/v1/namespaces/door/events", nil); status != http.StatusForbidden || !strings.Contains(body, "more than 8") {
			t.Errorf("nine groups: %d %s, want the door's 403", status, body)
		}
	})

	t.Run("one node's storm is refused per node", func(t *testing.T) {
		testDoorStorm(t, door, kube, node("n2"), node("n3"), admin, cm)
	})

	t.Run("kube-apiserver serves no Event request, event-apiserver counts every one, 429s included", func(t *testing.T) {
		if after := kubeEventRequests(); after != 0 || kubeBefore != 0 {
			t.Errorf("kube-apiserver's apiserver_request_total{resource=\"events\"} went from %.0f to %.0f", kubeBefore, after)
		}
		var served float64
		var routed int
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
			served, routed = eventAPIServerRequests()-eventsBefore, doorEventRequests()
			return served == float64(routed), nil
		})
		t.Logf("the door sent %d requests to event-apiserver, which counted %.0f Event requests", routed, served)
		if err != nil {
			for _, l := range door.log(t) {
				if eventUpstreams[l.upstream] {
					t.Logf("door: %s %s %s", l.method, l.uri, l.status)
				}
			}
			for _, r := range replicas {
				config := admin.config(&frontDoor{Door: &testbed.Door{URL: r.URL}}, kube)
				config.TLSClientConfig.CAData, config.TLSClientConfig.CAFile = nil, r.CACertFile()
				t.Logf("%s: %s", r.URL, framework.MetricLines(t, config, "apiserver_request_total", `resource="events"`))
			}
			t.Errorf("event-apiserver counted %.0f Event requests, the door sent it %d", served, routed)
		}
	})

	t.Run("event-apiserver authorizes through the door", func(t *testing.T) {
		// After the count above: like kube-apiserver's, event-apiserver's
		// apiserver_request_total does not count what its authorization
		// filter refuses. The service account may create and read Events,
		// not delete them; event-apiserver's SubjectAccessReview says so.
		err := serviceAccount.clientset(t, door, kube).CoreV1().Events(doorNamespace).Delete(ctx, recorded[0], metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "system:serviceaccount:door:event-reader") {
			t.Errorf("the service account deleting an Event through the door: %v, want 403", err)
		}
		uri := "/api/v1/namespaces/door/events/" + recorded[0]
		for _, l := range door.log(t) {
			if l.method == http.MethodDelete && l.uri == uri && (!eventUpstreams[l.upstream] || l.status != "403") {
				t.Errorf("the DELETE went to %s and got %s", l.upstream, l.status)
			}
		}
		// A node may not list Events in kube-system (system:node grants
		// create, patch and update).
		if _, err := n1.clientset(t, door, kube).CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("a node listing Events: %v, want 403", err)
		}
	})

	t.Run("namespace lifecycle on core/v1", func(t *testing.T) {
		through := admin.clientset(t, door, kube).CoreV1().Events
		_, errDoor := through("no-such-namespace").Create(ctx, framework.RecorderStyleCoreEvent("no-such-namespace", "x"), metav1.CreateOptions{})
		_, errKube := c.Client.CoreV1().Events("no-such-namespace").Create(ctx, framework.RecorderStyleCoreEvent("no-such-namespace", "x"), metav1.CreateOptions{})
		framework.AssertSameStatus(t, errKube, errDoor)
		if !apierrors.IsNotFound(errDoor) {
			t.Errorf("missing namespace through the door: %v, want 404", errDoor)
		}
		c.CreateNamespace(t, "door-leaving")
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, "door-leaving", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var errTerminating error
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			_, errTerminating = through("door-leaving").Create(ctx, framework.RecorderStyleCoreEvent("door-leaving", "late"), metav1.CreateOptions{})
			return apierrors.IsForbidden(errTerminating), nil
		})
		if err != nil {
			t.Fatalf("terminating namespace through the door: %v", errTerminating)
		}
		_, errKube = c.Client.CoreV1().Events("door-leaving").Create(ctx, framework.RecorderStyleCoreEvent("door-leaving", "late"), metav1.CreateOptions{})
		framework.AssertSameStatus(t, errKube, errTerminating)
	})

	t.Run("a client bypassing the door sees the same Events", func(t *testing.T) {
		direct, err := c.Client.CoreV1().Events(doorNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=settings"})
		if err != nil {
			t.Fatal(err)
		}
		viaDoor, err := admin.clientset(t, door, kube).CoreV1().Events(doorNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=settings"})
		if err != nil {
			t.Fatal(err)
		}
		names := func(l *corev1.EventList) []string {
			var n []string
			for _, e := range l.Items {
				n = append(n, fmt.Sprintf("%s/%d", e.Name, e.Count))
			}
			return n
		}
		if a, b := strings.Join(names(direct), ","), strings.Join(names(viaDoor), ","); a != b || a == "" {
			t.Errorf("straight to kube-apiserver: %s; through the door: %s", a, b)
		}
		for _, name := range recorded {
			if !strings.Contains(strings.Join(names(direct), ","), name+"/2") {
				t.Errorf("the kubelet's Event %s with count 2 is not seen straight from kube-apiserver", name)
			}
		}
		// And the other way round: written straight to kube-apiserver,
		// read through the door, in both APIs.
		written, err := c.Client.CoreV1().Events(doorNamespace).Create(ctx, framework.RecorderStyleCoreEvent(doorNamespace, "bypass"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		through := admin.clientset(t, door, kube)
		if got, err := through.CoreV1().Events(doorNamespace).Get(ctx, written.Name, metav1.GetOptions{}); err != nil || got.ResourceVersion != written.ResourceVersion {
			t.Errorf("through the door: %v %v", got, err)
		}
		if _, err := through.EventsV1().Events(doorNamespace).Get(ctx, written.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("events.k8s.io through the door: %v", err)
		}
		if _, err := c.Client.EventsV1().Events(doorNamespace).Get(ctx, written.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("events.k8s.io through kube-apiserver's aggregator: %v", err)
		}
	})

	t.Run("a watch outlives a replica", func(t *testing.T) {
		testDoorWatchAcrossReplicaLoss(t, door, kube, admin, replicas)
	})
}

// grantDoorRBAC gives nodes what kube's system:node role gives them for
// Events (bound to the group, as the Node authorizer would allow), and the
// service account "event-reader" what the kubectl commands need.
func grantDoorRBAC(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	framework.MustCreate(t, func() error {
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "door-nodes"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "system:nodes", APIGroup: "rbac.authorization.k8s.io"}},
		}, metav1.CreateOptions{})
		return err
	})
	framework.MustCreate(t, func() error {
		_, err := client.CoreV1().ServiceAccounts(doorNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "event-reader"}}, metav1.CreateOptions{})
		return err
	})
	framework.MustCreate(t, func() error {
		_, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "door-event-reader"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch", "create"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	framework.MustCreate(t, func() error {
		_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "door-event-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "door-event-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "event-reader", Namespace: doorNamespace}},
		}, metav1.CreateOptions{})
		return err
	})
}

// testKubectlThroughDoor runs what people run about Events, with a
// kubeconfig whose only change is the door's address.
func testKubectlThroughDoor(t *testing.T, bin, kubeconfig, name string, cm *corev1.ConfigMap) {
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := framework.KubectlAt(t, bin, kubeconfig, nil, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout
	}
	if out := run("get", "events", "-A"); !strings.Contains(out, "DoorFirst") {
		t.Errorf("get events -A misses the kubelet's Event:\n%s", out)
	}
	if out := run("get", "ev", "-n", doorNamespace, "--field-selector", "involvedObject.name=settings"); !strings.Contains(out, "DoorSecond") {
		t.Errorf("get ev --field-selector misses the kubelet's Event:\n%s", out)
	}
	if out := run("events", "-n", doorNamespace, "--for", "configmap/settings"); !strings.Contains(out, "DoorFirst") || !strings.Contains(out, "(x2") {
		t.Errorf("events --for configmap/settings:\n%s", out)
	}
	ev := framework.RecorderStyleCoreEvent(doorNamespace, "by-"+name)
	ev.APIVersion, ev.Kind = "v1", "Event"
	ev.InvolvedObject = corev1.ObjectReference{Kind: "ConfigMap", Namespace: doorNamespace, Name: cm.Name, UID: cm.UID, APIVersion: "v1"}
	ev.Reason = "CreatedBy" + strings.ReplaceAll(name, "-", "")
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	run("create", "-f", framework.WriteFile(t, "event.json", string(data)))
	out := run("describe", "configmap", "-n", doorNamespace, "settings")
	for _, want := range []string{"DoorFirst", "DoorSecond", ev.Reason} {
		if !strings.Contains(out, want) {
			t.Errorf("describe configmap misses %s:\n%s", want, out)
		}
	}
}

// testDoorStorm has node stormy create Events as fast as it can, first
// under one reporter name, then under a new name each time, and checks that
// it gets 429 with Retry-After for its reporter and then for itself (the
// node), while node calm's Events and kubectl describe go on.
func testDoorStorm(t *testing.T, door *frontDoor, kube *framework.KubeAPIServer, stormy, calm, admin doorClient, cm *corev1.ConfigMap) {
	ctx := context.Background()
	log := framework.NewResponseLog()
	config := stormy.config(door, kube)
	config.Wrap(log.Wrap)
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	create := func(i int, instance string) error {
		ev := framework.RecorderStyleCoreEvent(doorNamespace, framework.UniqueName("storm"))
		ev.Source, ev.ReportingController, ev.ReportingInstance = corev1.EventSource{Component: "kubelet", Host: instance}, "kubelet", instance
		ev.Message = fmt.Sprintf("storm %d", i)
		// No client-side retries: each 429 is seen as it comes.
		return client.CoreV1().RESTClient().Post().Namespace(doorNamespace).Resource("events").Body(ev).MaxRetries(0).Do(ctx).Error()
	}
	refusals := map[string]string{}
	for i := range 4 * doorReporterBurst {
		if err := create(i, stormy.name); apierrors.IsTooManyRequests(err) {
			refusals["reporter"] = err.Error()
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 * doorUserBurst {
		if err := create(i, fmt.Sprintf("%s-%d", stormy.name, i)); apierrors.IsTooManyRequests(err) {
			refusals["user"] = err.Error()
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("stormy node: %s; refusals %q", log, refusals)
	if !strings.Contains(refusals["reporter"], `reporter "kubelet/`+stormy.name) || !strings.Contains(refusals["reporter"], "system:node:"+stormy.name) {
		t.Errorf("no refusal of the node's reporter: %q", refusals["reporter"])
	}
	if !strings.Contains(refusals["user"], `user "system:node:`+stormy.name+`" is over its budget`) {
		t.Errorf("no refusal of the node itself when it changes reporter names: %q", refusals["user"])
	}
	log.Mu.Lock()
	if log.Codes[http.StatusTooManyRequests] == 0 || log.NoRetryAfter > 0 {
		t.Errorf("429s without Retry-After through the door: %s", log)
	}
	log.Mu.Unlock()

	// Meanwhile the calm node writes, and kubectl describe reads.
	calmClient := calm.clientset(t, door, kube)
	for i := range 3 {
		ev := framework.RecorderStyleCoreEvent(doorNamespace, framework.UniqueName("calm"))
		ev.InvolvedObject = corev1.ObjectReference{Kind: "ConfigMap", Namespace: doorNamespace, Name: cm.Name, UID: cm.UID, APIVersion: "v1"}
		ev.Source, ev.ReportingController, ev.ReportingInstance = corev1.EventSource{Component: "kubelet", Host: calm.name}, "kubelet", calm.name
		ev.Reason = fmt.Sprintf("Calm%d", i)
		if _, err := calmClient.CoreV1().Events(doorNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Errorf("the calm node's Event %d during the storm: %v", i, err)
		}
	}
	// The stormy node's budget refills slowly (a write every 5 s); a
	// burst of writes meets a refusal again.
	stillRefused := false
	for i := range 2 * doorReporterBurst {
		stillRefused = stillRefused || apierrors.IsTooManyRequests(create(i, stormy.name))
	}
	if !stillRefused {
		t.Errorf("the stormy node after the calm node's writes: no 429")
	}
	out := mustKubectlAt(t, admin.kubeconfig(t, door, kube), "describe", "configmap", "-n", doorNamespace, cm.Name)
	if !strings.Contains(out, "Calm2") {
		t.Errorf("describe configmap during the storm misses the calm node's Events:\n%s", out)
	}
}

func mustKubectlAt(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kubeconfig, nil, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// testDoorWatchAcrossReplicaLoss watches Events through the door as
// client-go's RetryWatcher (what informers and kubectl's waits build on)
// does, kills one replica, and checks that the watch delivers what is
// written after, with nothing lost or repeated.
func testDoorWatchAcrossReplicaLoss(t *testing.T, door *frontDoor, kube *framework.KubeAPIServer, admin doorClient, replicas []*framework.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := admin.clientset(t, door, kube)
	list, err := client.CoreV1().Events(doorNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "events", doorNamespace, fields.Everything())
	watcher, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	seen := map[string]int{}
	expect := func(name string) {
		t.Helper()
		timeout := time.After(framework.PollTimeout)
		for seen[name] == 0 {
			select {
			case e := <-watcher.ResultChan():
				if ev, ok := e.Object.(*corev1.Event); ok && e.Type == watch.Added {
					seen[ev.Name]++
				}
			case <-timeout:
				t.Fatalf("the watch through the door never delivered %s (saw %v)", name, seen)
			}
		}
	}
	write := func(name string) {
		t.Helper()
		ev := framework.RecorderStyleCoreEvent(doorNamespace, name)
		// A reporter of its own each, so that the storm budgets (small in
		// this cluster) never refuse the watch's writes.
		ev.Source.Host, ev.ReportingInstance = name, name
		if _, err := client.CoreV1().Events(doorNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatalf("writing %s through the door: %v", name, err)
		}
	}
	write("before-loss")
	expect("before-loss")
	watchesBefore := doorWatchCount(t, door)
	// The replica that holds the watch is the one to lose: the watch is
	// then cut for certain, and must resume on the other.
	var serving *framework.Server
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		for _, r := range replicas {
			config := admin.config(&frontDoor{Door: &testbed.Door{URL: r.URL}}, kube)
			config.TLSClientConfig.CAData, config.TLSClientConfig.CAFile = nil, r.CACertFile()
			if framework.MetricValue(t, config, "apiserver_longrunning_requests", map[string]string{"resource": "events", "verb": "WATCH"}) > 0 {
				serving = r
			}
		}
		return serving != nil, nil
	})
	if err != nil {
		t.Fatal("no replica reports the watch in apiserver_longrunning_requests")
	}
	if err := serving.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		write(fmt.Sprintf("after-loss-%d", i))
	}
	for i := range 3 {
		expect(fmt.Sprintf("after-loss-%d", i))
	}
	for name, n := range seen {
		if n > 1 {
			t.Errorf("%s delivered %d times", name, n)
		}
	}
	// The door logs a watch when it ends: the one on the killed replica
	// ended, and the RetryWatcher opened another from its last
	// resourceVersion, which delivered the writes above.
	if ended := doorWatchCount(t, door) - watchesBefore; ended != 1 {
		t.Errorf("watches ended through the door while their replica died: %d, want 1", ended)
	}
	for _, l := range door.log(t) {
		if l.tried != "" {
			t.Logf("the door retried on another server: %s %s, tried %s, answered by %s with %s", l.method, l.uri, l.tried, l.upstream, l.status)
		}
	}
}

func doorWatchCount(t *testing.T, door *frontDoor) int {
	n := 0
	for _, l := range door.log(t) {
		if strings.Contains(l.uri, "watch=true") && strings.Contains(l.uri, "/namespaces/door/events") {
			n++
		}
	}
	return n
}

// webSocketWatchFirstFrame opens a watch over WebSocket through the door as
// client: an HTTP/1.1 upgrade (101 Switching Protocols), then create, then
// the first frame's text.
func webSocketWatchFirstFrame(t *testing.T, door *frontDoor, kube *framework.KubeAPIServer, client doorClient, uri string, create func() error) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(client.certFile, client.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(door.URL, "https://")
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: certPool(t, kube.CAData), Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(framework.PollTimeout)); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: https://%s\r\n\r\n",
		uri, host, base64.StdEncoding.EncodeToString(key), host)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("WebSocket upgrade of %s through the door: %d %s", uri, resp.StatusCode, body)
	}
	if err := create(); err != nil {
		t.Fatal(err)
	}
	// One unmasked server frame: FIN and opcode, then a 7-bit length or
	// 126/127 and a 16/64-bit one.
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		t.Fatal(err)
	}
	n := uint64(head[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 1<<20 {
		t.Fatalf("WebSocket frame of %d bytes", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	return string(payload)
}
