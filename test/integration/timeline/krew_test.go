package timeline

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineKrewManifest releases the plugin as hack/build-plugin.sh does
// for this machine's platform, serves the archive from a loopback server,
// and checks the rendered manifest with krew's own tools: the krew-index's
// validate-krew-manifest (structure, platforms, and an install by krew that
// downloads the archive and checks its sha256 and LICENSE), then an install
// with `kubectl krew install --manifest`, after which kubectl runs the
// plugin from krew's bin directory.
func TestTimelineKrewManifest(t *testing.T) {
	t.Parallel()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	script := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	script(nil, "hack/build-krew.sh")
	bin := filepath.Join(root, "_output", "bin")
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")

	release := t.TempDir()
	server := httptest.NewServer(http.FileServer(http.Dir(release)))
	defer server.Close()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	manifest := strings.TrimSpace(script([]string{"PLUGIN_PLATFORMS=" + platform, "PLUGIN_OUT=" + release},
		"hack/build-plugin.sh", "--release", "v0.1.0", server.URL))
	if manifest != filepath.Join(release, "timeline.yaml") {
		t.Fatalf("build-plugin.sh printed %q, want the manifest's path", manifest)
	}
	rendered, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rendered), "${") || strings.Count(string(rendered), "- selector:") != 1 {
		t.Fatalf("rendered manifest has placeholders left or other platforms than %s:\n%s", platform, rendered)
	}

	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), append([]string{path}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run(nil, filepath.Join(bin, "validate-krew-manifest"), "-manifest", manifest); !strings.Contains(out, "all 1 spec.platforms installed fine") {
		t.Errorf("validate-krew-manifest:\n%s", out)
	}

	krewRoot := t.TempDir()
	krewEnv := []string{"KREW_ROOT=" + krewRoot, "KREW_NO_UPGRADE_CHECK=1"}
	run(krewEnv, filepath.Join(bin, "kubectl"), "krew", "install", "--manifest", manifest)
	installed := "PATH=" + filepath.Join(krewRoot, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	if out := run(append(krewEnv, installed), filepath.Join(bin, "kubectl"), "timeline", "--help"); !strings.Contains(out, "kubectl timeline [TYPE/NAME") {
		t.Errorf("kubectl timeline --help, installed by krew:\n%s", out)
	}
}
