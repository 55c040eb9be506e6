package framework

// A history-only replica (--history-only) run as a bare process beside a
// kube-apiserver, so that a test can SIGKILL and restart it.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// HistoryOnlyReplica is a history-only server run as a process, so the
// test can SIGKILL it.
type HistoryOnlyReplica struct {
	Proc   *testbed.Process
	Client *RawClient
}

// StartHistoryOnlyReplica runs one with storeArgs (none: SQLite in its
// data directory).
func StartHistoryOnlyReplica(t *testing.T, kube *KubeAPIServer, storeArgs []string) *HistoryOnlyReplica {
	t.Helper()
	dir := t.TempDir()
	port := FreePort(t)
	r := &HistoryOnlyReplica{
		Proc: &testbed.Process{Name: "history-only", Path: ServerBinary(t), LogPath: filepath.Join(dir, "server.log"),
			Args: append([]string{
				"--history-only", "--kubeconfig=" + kube.KubeconfigPath,
				"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--data-dir=" + dir,
				// Slow batches leave changes queued and unstored when the kill comes.
				"--history-batch-interval=300ms", "--history-batch-size=40",
			}, storeArgs...)},
		Client: &RawClient{BaseURL: fmt.Sprintf("https://127.0.0.1:%d", port), Token: kube.AdminToken,
			HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
				// The generated serving certificate; what is under test
				// here is capture, not the TLS chain.
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
			}}},
	}
	t.Cleanup(func() {
		_ = r.Proc.Stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", r.Proc.LogPath, r.Proc.Tail(60))
		}
	})
	r.Start(t)
	return r
}

// Start runs the replica and waits for /readyz, which holds once capture
// has stored where it starts from.
func (r *HistoryOnlyReplica) Start(t *testing.T) {
	t.Helper()
	if err := r.Proc.Start(); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), PollInterval, 90*time.Second, true, func(context.Context) (bool, error) {
		if !r.Proc.Running() {
			return false, fmt.Errorf("exited: %s", r.Proc.Exited())
		}
		resp, err := r.Client.HTTP.Get(r.Client.BaseURL + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("history-only replica not ready: %v\n%s", err, r.Proc.Tail(40))
	}
}

// Metric reads one counter from /metrics.
func (r *HistoryOnlyReplica) Metric(t *testing.T, series string) float64 {
	t.Helper()
	resp := r.Client.Do(t, "GET", "/metrics", nil, nil)
	if resp.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.Code, resp.Body)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(resp.Body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Kubeconfig writes a kubeconfig for the replica itself with token (its
// serving certificate is generated, so it skips verification, as Client
// does), for kubectl and plugins pointed at it.
func (r *HistoryOnlyReplica) Kubeconfig(t *testing.T, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["replica"] = &clientcmdapi.Cluster{Server: r.Client.BaseURL, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["replica"] = &clientcmdapi.Context{Cluster: "replica", AuthInfo: "user"}
	cfg.CurrentContext = "replica"
	path := filepath.Join(t.TempDir(), "replica.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// RestConfig is a client configuration for the replica with token.
func (r *HistoryOnlyReplica) RestConfig(token string) *rest.Config {
	return &rest.Config{Host: r.Client.BaseURL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}
