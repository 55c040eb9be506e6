package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWithoutEventRoutes: the rollback configuration keeps everything but
// the two Event locations, so every request goes to kube-apiserver.
func TestWithoutEventRoutes(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "door", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	rolledBack, err := withoutEventRoutes(conf)
	if err != nil {
		t.Fatal(err)
	}
	got := string(rolledBack)
	if strings.Count(got, "location") != 1 || !strings.Contains(got, "location / {") || strings.Contains(got, "proxy_pass https://$door_event") {
		t.Fatalf("rolled back configuration still routes Events elsewhere, or lost its last location:\n%s", got)
	}
	if strings.Count(got, "{") != strings.Count(got, "}") {
		t.Fatalf("unbalanced braces after removing the Event locations:\n%s", got)
	}
	if len(conf)-len(rolledBack) > 600 {
		t.Fatalf("removed %d bytes, more than two locations", len(conf)-len(rolledBack))
	}
}
