package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// publicPaths answer anonymous callers (system:public-info-viewer's paths);
// privatePaths, a single health check among them, do not.
var (
	publicPaths  = []string{"/healthz", "/livez", "/readyz", "/readyz?verbose", "/livez?exclude=etcd", "/version", "/version/"}
	privatePaths = []string{"/metrics", "/api", "/apis", "/api/v1/events", "/openapi/v2", "/", "/readyzz", "/readyz/etcd", "/livez/ping"}
)

// TestAnonymousPublicInfoStandalone: probes and scrapers need no token for
// health and /version; everything else stays 401 for them, and a wrong
// token is 401 even on the public paths, as in kube-apiserver.
func TestAnonymousPublicInfoStandalone(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	config := server.Config(t)
	anonymous := framework.NewRawClient(t, config, "")
	wrongToken := framework.NewRawClient(t, config, "0"+config.BearerToken[1:]+"x")
	tests := []struct {
		name     string
		client   *framework.RawClient
		paths    []string
		wantCode int
	}{
		{name: "anonymous public", client: anonymous, paths: publicPaths, wantCode: 200},
		{name: "anonymous private", client: anonymous, paths: privatePaths, wantCode: 401},
		{name: "wrong token public", client: wrongToken, paths: publicPaths, wantCode: 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range tc.paths {
				if r := tc.client.Do(t, "GET", path, nil, nil); r.Code != tc.wantCode {
					t.Errorf("GET %s: %d, want %d: %.200s", path, r.Code, tc.wantCode, r.Body)
				}
			}
		})
	}
	// Anonymous callers may read, not act: kube's rule is get only.
	if r := anonymous.Do(t, "POST", "/readyz", nil, nil); r.Code != 403 {
		t.Errorf("anonymous POST /readyz: %d, want 403: %.200s", r.Code, r.Body)
	}
	checkVersionDocument(t, anonymous.Do(t, "GET", "/version", nil, nil).Body, "")
}

// TestAggregatedReadOnlyDataDir: aggregated, with an external etcd and a
// given serving certificate, the server writes nothing under --data-dir (a
// read-only, empty directory here), serves, and answers anonymous probes
// and /version itself; other paths go to kube-apiserver's
// SubjectAccessReview, which refuses system:anonymous.
func TestAggregatedReadOnlyDataDir(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcd(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})

	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// Tests run as root, whom 0500 does not stop: the check that counts is
	// that the directory is still empty afterwards.
	dataDir := filepath.Join(dir, "readonly")
	if err := os.Mkdir(dataDir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dataDir, 0o700) })

	server := framework.StartServer(t, framework.ServerOptions{
		DataDir:              dataDir,
		EtcdServers:          etcd.ClientURL(),
		AggregatedKubeconfig: kube.KubeconfigPath,
		ServingCertFile:      certFile,
		ServingKeyFile:       keyFile,
		// The embedded history store is a file under --data-dir; with
		// history off (or in PostgreSQL) nothing is written.
		ExtraArgs: []string{"--history=false"},
	})
	anonymous := framework.NewRawClient(t, &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: certFile}}, "")
	for _, path := range publicPaths {
		if r := anonymous.Do(t, "GET", path, nil, nil); r.Code != 200 {
			t.Errorf("anonymous GET %s: %d, want 200: %.200s", path, r.Code, r.Body)
		}
	}
	for _, path := range []string{"/metrics", "/readyz/etcd", "/apis/events.k8s.io/v1/events"} {
		if r := anonymous.Do(t, "GET", path, nil, nil); r.Code != 403 {
			t.Errorf("anonymous GET %s: %d, want 403 from kube-apiserver's SubjectAccessReview: %.200s", path, r.Code, r.Body)
		}
	}
	checkVersionDocument(t, anonymous.Do(t, "GET", "/version", nil, nil).Body, "")

	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the server wrote into --data-dir: %v", entries)
	}
	if info, err := os.Stat(dataDir); err != nil || info.Mode().Perm() != 0o500 {
		t.Errorf("--data-dir changed: %v %v", info.Mode(), err)
	}
}

// checkVersionDocument: /version keeps kube's shape at the Kubernetes API
// level and carries the project's version as build metadata; wantVersion,
// when set, is the project version the binary was built with.
func checkVersionDocument(t *testing.T, body []byte, wantVersion string) {
	t.Helper()
	var info apimachineryversion.Info
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("/version: %v: %s", err, body)
	}
	if info.Major != "1" || info.Minor != "36" || info.EmulationMajor != "1" || info.EmulationMinor != "36" {
		t.Errorf("/version major/minor/emulation %s/%s/%s/%s, want 1/36/1/36", info.Major, info.Minor, info.EmulationMajor, info.EmulationMinor)
	}
	v, err := utilversion.ParseSemantic(info.GitVersion)
	if err != nil {
		t.Fatalf("/version gitVersion %q does not parse as kubectl parses it: %v", info.GitVersion, err)
	}
	if v.Major() != 1 || v.Minor() != 36 || v.Patch() != 3 || v.PreRelease() != "" {
		t.Errorf("/version gitVersion %q, want 1.36.3 with build metadata", info.GitVersion)
	}
	want := "v1.36.3+eventapiserver."
	if wantVersion != "" {
		want += wantVersion
		if info.GitVersion != want {
			t.Errorf("/version gitVersion %q, want %q", info.GitVersion, want)
		}
		if len(info.GitCommit) != 40 || info.GitTreeState == "" || info.BuildDate == "" {
			t.Errorf("/version lacks the build's commit, tree state or date: %+v", info)
		}
	} else if !strings.HasPrefix(info.GitVersion, want) {
		t.Errorf("/version gitVersion %q, want prefix %q", info.GitVersion, want)
	}
}

// TestOperatorFlags runs the binary with the flags an operator of a
// Kubernetes component expects, and checks each one does what it says.
func TestOperatorFlags(t *testing.T) {
	t.Parallel()
	bin := framework.ServerBinary(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(dir, "audit.log")
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		"--logging-format=json",
		"--v=4",
		"--feature-gates=ConcurrentWatchObjectDecode=true",
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + auditLog,
	}})
	admin := framework.AdminRawClient(t, server)
	auditedPath := "/api/v1/namespaces/default/events?labelSelector=audit%3D" + framework.UniqueName("audit")

	t.Run("logging-format json and v", func(t *testing.T) {
		f, err := os.Open(server.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		var jsonLines, verbose int
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			// The framework's start marker, and the kubeconfig line the
			// server prints on stdout for the user.
			if len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(line, []byte("=== ")) || bytes.HasPrefix(line, []byte("export KUBECONFIG=")) {
				continue
			}
			var entry struct {
				Msg string `json:"msg"`
				V   *int   `json:"v"`
			}
			if err := json.Unmarshal(line, &entry); err != nil || entry.Msg == "" || entry.V == nil {
				t.Errorf("log line is not a JSON log entry: %.300s", line)
				continue
			}
			jsonLines++
			if *entry.V >= 4 {
				verbose++
			}
		}
		if jsonLines == 0 || verbose == 0 {
			t.Errorf("%d JSON log lines, %d at --v=4 or above; want some of each", jsonLines, verbose)
		}
	})

	t.Run("feature-gates", func(t *testing.T) {
		r := admin.Do(t, "GET", "/metrics", nil, nil)
		want := `kubernetes_feature_enabled{name="ConcurrentWatchObjectDecode",stage="BETA"} 1`
		if r.Code != 200 || !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("/metrics (%d) lacks %s", r.Code, want)
		}
	})

	t.Run("audit", func(t *testing.T) {
		if r := admin.Do(t, "GET", auditedPath, nil, nil); r.Code != 200 {
			t.Fatalf("GET %s: %d", auditedPath, r.Code)
		}
		// The log backend writes each event as the request ends; poll for it.
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			data, err := os.ReadFile(auditLog)
			if err != nil {
				return false, nil
			}
			for _, line := range bytes.Split(data, []byte("\n")) {
				var ev struct {
					Level      string `json:"level"`
					RequestURI string `json:"requestURI"`
					Verb       string `json:"verb"`
					User       struct {
						Username string `json:"username"`
					} `json:"user"`
				}
				if json.Unmarshal(line, &ev) == nil && ev.RequestURI == auditedPath {
					if ev.Level != "Metadata" || ev.Verb != "list" || ev.User.Username != "event-apiserver-admin" {
						return false, fmt.Errorf("audit event %+v, want Metadata list by event-apiserver-admin", ev)
					}
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Errorf("no audit event for %s in %s: %v", auditedPath, auditLog, err)
		}
	})

	t.Run("version", func(t *testing.T) {
		r := admin.Do(t, "GET", "/version", nil, nil)
		checkVersionDocument(t, r.Body, "")
		out := runBinary(t, bin, "--version")
		if !strings.HasPrefix(out, "event-apiserver v") || !strings.HasSuffix(out, " (Kubernetes API v1.36.3)\n") {
			t.Errorf("--version printed %q", out)
		}
		var info apimachineryversion.Info
		if err := json.Unmarshal(r.Body, &info); err != nil {
			t.Fatal(err)
		}
		if raw := runBinary(t, bin, "--version=raw"); !strings.Contains(raw, `GitVersion:"`+info.GitVersion+`"`) {
			t.Errorf("--version=raw printed %q, want GitVersion %q", raw, info.GitVersion)
		}
		// kubectl parses the server's gitVersion for its skew check and
		// warns when it cannot.
		kubectl := exec.Command(framework.KubectlBinary(t), "--kubeconfig="+server.Kubeconfig, "version", "-o", "json")
		var stderr bytes.Buffer
		kubectl.Stderr = &stderr
		stdout, err := kubectl.Output()
		if err != nil || stderr.Len() != 0 {
			t.Fatalf("kubectl version: %v: %s", err, stderr.String())
		}
		if !bytes.Contains(stdout, []byte(info.GitVersion)) {
			t.Errorf("kubectl version does not show %s: %s", info.GitVersion, stdout)
		}
	})

	t.Run("help grouped by flag set", func(t *testing.T) {
		out := runBinary(t, bin, "--help")
		for _, section := range []string{"Event-apiserver flags:", "Generic flags:", "Auditing flags:", "Logs flags:", "Global flags:"} {
			if !strings.Contains(out, "\n"+section+"\n") {
				t.Errorf("--help has no %q section", section)
			}
		}
		for _, flag := range []string{"--version", "--logging-format", "--feature-gates", "--audit-policy-file", "--audit-log-path", "-v, --v"} {
			if !strings.Contains(out, flag) {
				t.Errorf("--help does not list %s", flag)
			}
		}
	})

	t.Run("bad values refused", func(t *testing.T) {
		tests := []struct {
			name    string
			args    []string
			wantErr string
		}{
			{name: "logging format", args: []string{"--logging-format=xml"}, wantErr: `Unsupported log format`},
			{name: "feature gate", args: []string{"--feature-gates=NoSuchGate=true"}, wantErr: "unrecognized feature gate: NoSuchGate"},
			{name: "version", args: []string{"--version=maybe"}, wantErr: `invalid argument "maybe" for "--version" flag`},
			{name: "audit", args: []string{"--audit-log-maxage=-1", "--audit-log-path=" + filepath.Join(dir, "x.log")}, wantErr: "--audit-log-maxage -1 can't be a negative number"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				// Bounded: a command line wrongly accepted would start a server.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				out, err := exec.CommandContext(ctx, bin, append(tc.args, "--data-dir="+filepath.Join(dir, "refused"))...).CombinedOutput()
				if err == nil || !strings.Contains(string(out), tc.wantErr) {
					t.Errorf("%v: %v, want an error with %q: %s", tc.args, err, tc.wantErr, out)
				}
			})
		}
		if _, err := os.Stat(filepath.Join(dir, "refused")); err == nil {
			t.Errorf("a refused command line created --data-dir")
		}
	})
}

// runBinary runs a command that exits at once and returns its stdout.
func runBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out)
}
