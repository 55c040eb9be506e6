package server

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestFatalErrorsExitNonZero runs the binary into errors it cannot serve
// past: each must end the process with a non-zero status and the cause on
// stderr, so that a supervisor with Restart=on-failure restarts it and its
// log says why.
func TestFatalErrorsExitNonZero(t *testing.T) {
	t.Parallel()
	bin := framework.ServerBinary(t)
	for _, tc := range []struct {
		name string
		// setup prepares the data directory and returns extra flags.
		setup     func(t *testing.T, dataDir string) []string
		wantCause string
	}{
		{
			name: "embedded etcd data dir unusable",
			setup: func(t *testing.T, dataDir string) []string {
				if err := os.MkdirAll(dataDir, 0o700); err != nil {
					t.Fatal(err)
				}
				// A file where etcd wants its directory.
				if err := os.WriteFile(filepath.Join(dataDir, "etcd"), []byte("not a directory"), 0o600); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			wantCause: "embedded etcd",
		},
		{
			name:      "aggregated with the embedded etcd",
			setup:     func(*testing.T, string) []string { return []string{"--aggregated"} },
			wantCause: "--aggregated needs --etcd-servers",
		},
		{
			name:      "two modes",
			setup:     func(*testing.T, string) []string { return []string{"--history-only", "--aggregated"} },
			wantCause: "--history-only and --aggregated are two modes",
		},
		{
			name: "a flag the mode ignores",
			setup: func(*testing.T, string) []string {
				return []string{"--enable-admission-plugins=NamespaceLifecycle"}
			},
			wantCause: "--enable-admission-plugins=NamespaceLifecycle needs --aggregated",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			args := append([]string{
				"--data-dir=" + dataDir,
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(framework.FreePort(t)),
			}, tc.setup(t, dataDir)...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Fatalf("want a non-zero exit status, got %v\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantCause) {
				t.Errorf("exit status %d, stderr without %q:\n%s", exit.ExitCode(), tc.wantCause, stderr.String())
			}
		})
	}
}
