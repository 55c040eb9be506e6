package framework

// Helpers shared by the integration tests: running kubectl against a server
// and reading its tables, raw HTTP requests with or without the admin token,
// round trippers that see what a client sent and got, polling bounds and
// unique names.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// kubectlPath is the kubectl preinstalled on the test machines (v1.32).
	kubectlPath = "/usr/bin/kubectl"

	// PollInterval and PollTimeout bound every wait in these tests.
	PollInterval = 100 * time.Millisecond
	PollTimeout  = 30 * time.Second
)

// PreinstalledKubectl is the preinstalled kubectl, or the first one on
// PATH; the test is skipped when there is none. KubectlBinary is v1.36.3's.
func PreinstalledKubectl(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(kubectlPath); err == nil {
		return kubectlPath
	}
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	return path
}

// Kubectl runs kubectl against kubeconfig and returns stdout, stderr and the
// error (non-nil when kubectl exits non-zero).
func Kubectl(t *testing.T, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	return KubectlWithEnv(t, kubeconfig, nil, args...)
}

// KubectlWithEnv is kubectl with extra environment variables (KEY=value).
func KubectlWithEnv(t *testing.T, kubeconfig string, env []string, args ...string) (string, string, error) {
	t.Helper()
	return KubectlAt(t, PreinstalledKubectl(t), kubeconfig, env, args...)
}

// KubectlAt runs the kubectl binary bin, for tests that compare kubectl
// versions (the preinstalled one and the v1.36.3 build).
func KubectlAt(t *testing.T, bin, kubeconfig string, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+kubeconfig,
		// A cache per server: discovery from one server must not leak
		// into another test's server on a reused port.
		"KUBECACHEDIR="+filepath.Join(filepath.Dir(kubeconfig), "kubectl-cache"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// MustKubectl runs kubectl and fails the test when it exits non-zero.
func MustKubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	stdout, stderr, err := Kubectl(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// WriteFile writes content to a new file under t.TempDir().
func WriteFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var nameSeq atomic.Int64

// UniqueName is a DNS-1123 name unique within the test binary.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, nameSeq.Add(1))
}

// RawClient sends HTTP requests to a server with its serving CA trusted and
// a chosen bearer token (none for anonymous requests).
type RawClient struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// NewRawClient trusts the CA of config and authenticates with token; an
// empty token sends no Authorization header.
func NewRawClient(t *testing.T, config *rest.Config, token string) *RawClient {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(config.CAData) {
		if config.CAFile == "" {
			t.Fatal("server kubeconfig has no CA")
		}
		data, err := os.ReadFile(config.CAFile)
		if err != nil || !pool.AppendCertsFromPEM(data) {
			t.Fatalf("reading CA %s: %v", config.CAFile, err)
		}
	}
	return &RawClient{
		BaseURL: config.Host,
		Token:   token,
		HTTP: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}
}

// AdminRawClient uses the admin token from the server's kubeconfig.
func AdminRawClient(t *testing.T, s *Server) *RawClient {
	t.Helper()
	config := s.Config(t)
	if config.BearerToken == "" {
		t.Fatal("server kubeconfig has no bearer token")
	}
	return NewRawClient(t, config, config.BearerToken)
}

// Response is what a raw request returned.
type Response struct {
	Code        int
	ContentType string
	Header      http.Header
	Body        []byte
}

// Do sends one request; header holds extra headers (Content-Type, Accept).
func (c *RawClient) Do(t *testing.T, method, path string, body []byte, header map[string]string) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return Response{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Header: resp.Header, Body: data}
}

// Status decodes the body as a metav1.Status (JSON), failing the test when
// it is not one.
func (r Response) Status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.Body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("response %d is not a Status (%v): %s", r.Code, err, r.Body)
	}
	return s
}

// PollCtx is a context for wait.PollUntilContextTimeout callers that also
// need one for the calls inside the condition.
func PollCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*PollTimeout)
	t.Cleanup(cancel)
	return ctx
}

// Send is Do for a Request value.
func (c *RawClient) Send(t *testing.T, r Request) Response {
	t.Helper()
	header := map[string]string{}
	if r.ContentType != "" {
		header["Content-Type"] = r.ContentType
	}
	return c.Do(t, r.Method, r.Path, r.Body, header)
}

// Content types and paths of raw requests.
const (
	ContentJSON      = "application/json"
	ContentMerge     = "application/merge-patch+json"
	ContentJSONPatch = "application/json-patch+json"
	ContentStrategic = "application/strategic-merge-patch+json"
	ContentApply     = "application/apply-patch+yaml"

	CoreEventsPath   = "/api/v1/namespaces/default/events"
	EventsEventsPath = "/apis/events.k8s.io/v1/namespaces/default/events"
)

// Request is one raw HTTP request.
type Request struct {
	Method, Path, ContentType string
	Body                      []byte
}

// TableAccept is what kubectl get sends.
const TableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// AggregatedDiscovery is the Accept header of clients that ask for
// aggregated discovery (KEP-3352), as kubectl and client-go do.
const AggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// DecodeJSON decodes a response's JSON body into into, failing the test
// when it does not decode.
func DecodeJSON(t *testing.T, r Response, into any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, into); err != nil {
		t.Fatalf("decoding %T: %v: %.300s", into, err, r.Body)
	}
}

// UnthrottledClient is a clientset without client-side rate limiting, for
// tests that send a few hundred requests (the field-selector tables).
func UnthrottledClient(t *testing.T, config *rest.Config) kubernetes.Interface {
	t.Helper()
	config = rest.CopyConfig(config)
	config.QPS, config.Burst = 1000, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// ParseTable splits kubectl's column output by the header's column starts
// (a column starts after two or more spaces; "LAST SEEN" has one).
func ParseTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatalf("no table in kubectl output %q", out)
	}
	header := lines[0]
	var starts []int
	for i := 0; i < len(header); i++ {
		if header[i] != ' ' && (i == 0 || (i >= 2 && header[i-1] == ' ' && header[i-2] == ' ')) {
			starts = append(starts, i)
		}
	}
	cell := func(line string, k int) string {
		from, to := starts[k], len(line)
		if k+1 < len(starts) && starts[k+1] < len(line) {
			to = starts[k+1]
		}
		if from >= len(line) {
			return ""
		}
		return strings.TrimSpace(line[from:to])
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for k := range starts {
			row[cell(header, k)] = cell(line, k)
		}
		rows = append(rows, row)
	}
	return rows
}

// AssertHeaders checks the header line's column names, in order.
func AssertHeaders(t *testing.T, out string, want []string) {
	t.Helper()
	header := strings.SplitN(out, "\n", 2)[0]
	var got []string
	for _, f := range strings.Split(header, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			got = append(got, f)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("columns = %q, want %q\n%s", got, want, out)
	}
}

// Truncate keeps the first n bytes of b, for messages that quote a body.
func Truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// ResponseLog is what a reporter's client saw on the wire: every attempt,
// including the retries client-go's REST client makes on a 429.
// Its fields are read under Mu once the client has stopped, or for a
// snapshot while it runs.
type ResponseLog struct {
	Mu             sync.Mutex
	Codes          map[int]int
	NoRetryAfter   int
	RetryAfters    map[string]int
	TransportErrs  int
	ServerErrors   []string
	InFlight       atomic.Int64
	LastCompletion atomic.Int64
}

// NewResponseLog is an empty log; Wrap a client's transport with it.
func NewResponseLog() *ResponseLog {
	return &ResponseLog{Codes: map[int]int{}, RetryAfters: map[string]int{}}
}

// Wrap records every round trip of rt (rest.Config.Wrap takes it).
func (l *ResponseLog) Wrap(rt http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		l.InFlight.Add(1)
		defer func() {
			l.LastCompletion.Store(time.Now().UnixNano())
			l.InFlight.Add(-1)
		}()
		resp, err := rt.RoundTrip(req)
		l.Mu.Lock()
		defer l.Mu.Unlock()
		if err != nil {
			l.TransportErrs++
			return resp, err
		}
		l.Codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			if ra := resp.Header.Get("Retry-After"); ra == "" {
				l.NoRetryAfter++
			} else {
				l.RetryAfters[ra]++
			}
		}
		if resp.StatusCode >= 500 {
			l.ServerErrors = append(l.ServerErrors, fmt.Sprintf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode))
		}
		return resp, err
	})
}

func (l *ResponseLog) String() string {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return fmt.Sprintf("codes %v, 429 Retry-After values %v, 429 without Retry-After %d, transport errors %d",
		l.Codes, l.RetryAfters, l.NoRetryAfter, l.TransportErrs)
}

// RoundTripperFunc is an http.RoundTripper made of a function, for
// rest.Config.Wrap.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// BenchEnvInt reads a positive count from the environment, def when unset:
// the sizes of the benchmarks that run as tests.
func BenchEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
