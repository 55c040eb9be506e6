package integration

// Helpers shared by the integration tests: running kubectl against a server,
// raw HTTP requests with or without the admin token, and Event fixtures.

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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

const (
	// kubectlPath is the kubectl preinstalled on the test machines (v1.32).
	kubectlPath = "/usr/bin/kubectl"

	// pollInterval and pollTimeout bound every wait in these tests.
	pollInterval = 100 * time.Millisecond
	pollTimeout  = 30 * time.Second
)

// kubectlBinary is the preinstalled kubectl, or the first one on PATH; the
// test is skipped when there is none.
func kubectlBinary(t *testing.T) string {
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

// kubectl runs kubectl against kubeconfig and returns stdout, stderr and the
// error (non-nil when kubectl exits non-zero).
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, string, error) {
	t.Helper()
	return kubectlWithEnv(t, kubeconfig, nil, args...)
}

// kubectlWithEnv is kubectl with extra environment variables (KEY=value).
func kubectlWithEnv(t *testing.T, kubeconfig string, env []string, args ...string) (string, string, error) {
	t.Helper()
	return kubectlAt(t, kubectlBinary(t), kubeconfig, env, args...)
}

// kubectlAt runs the kubectl binary bin, for tests that compare kubectl
// versions (the preinstalled one and the v1.36.3 build).
func kubectlAt(t *testing.T, bin, kubeconfig string, env []string, args ...string) (string, string, error) {
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

// mustKubectl runs kubectl and fails the test when it exits non-zero.
func mustKubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	stdout, stderr, err := kubectl(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// writeFile writes content to a new file under t.TempDir().
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var nameSeq atomic.Int64

// uniqueName is a DNS-1123 name unique within the test binary.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, nameSeq.Add(1))
}

// rawClient sends HTTP requests to a server with its serving CA trusted and
// a chosen bearer token (none for anonymous requests).
type rawClient struct {
	baseURL string
	token   string
	client  *http.Client
}

// newRawClient trusts the CA of config and authenticates with token; an
// empty token sends no Authorization header.
func newRawClient(t *testing.T, config *rest.Config, token string) *rawClient {
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
	return &rawClient{
		baseURL: config.Host,
		token:   token,
		client: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}
}

// adminRawClient uses the admin token from the server's kubeconfig.
func adminRawClient(t *testing.T, s *framework.Server) *rawClient {
	t.Helper()
	config := s.Config(t)
	if config.BearerToken == "" {
		t.Fatal("server kubeconfig has no bearer token")
	}
	return newRawClient(t, config, config.BearerToken)
}

// response is what a raw request returned.
type response struct {
	code        int
	contentType string
	header      http.Header
	body        []byte
}

// do sends one request; header holds extra headers (Content-Type, Accept).
func (c *rawClient) do(t *testing.T, method, path string, body []byte, header map[string]string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), header: resp.Header, body: data}
}

// status decodes the body as a metav1.Status (JSON), failing the test when
// it is not one.
func (r response) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("response %d is not a Status (%v): %s", r.code, err, r.body)
	}
	return s
}

// pollCtx is a context for wait.PollUntilContextTimeout callers that also
// need one for the calls inside the condition.
func pollCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*pollTimeout)
	t.Cleanup(cancel)
	return ctx
}

// send is do for a request value.
func (c *rawClient) send(t *testing.T, r request) response {
	t.Helper()
	header := map[string]string{}
	if r.contentType != "" {
		header["Content-Type"] = r.contentType
	}
	return c.do(t, r.method, r.path, r.body, header)
}
