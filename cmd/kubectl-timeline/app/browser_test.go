package app

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestOpenBrowser runs $BROWSER as the plugin would, with a script that
// records what it was given: a file only the user may read that redirects
// to the URL, so the token is on no command line.
func TestOpenBrowser(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the recording browser is a shell script")
	}
	dir := t.TempDir()
	got := filepath.Join(dir, "args")
	script := filepath.Join(dir, "browser")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s' \"$1\" > "+got+".tmp && mv "+got+".tmp "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)
	url := "http://127.0.0.1:4242/tok&en/"
	cleanup, err := openBrowser(url)
	if err != nil {
		t.Fatal(err)
	}
	var arg []byte
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		arg, err = os.ReadFile(got)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the browser was not run: %v", err)
	}
	page, ok := strings.CutPrefix(string(arg), "file://")
	if !ok || strings.Contains(string(arg), "tok") {
		t.Fatalf("the browser was given %q, want a file:// URL without the token", arg)
	}
	info, err := os.Stat(page)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the redirect file's mode is %v, want 0600", info.Mode().Perm())
	}
	body, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `content="0;url=http://127.0.0.1:4242/tok&amp;en/"`) {
		t.Errorf("the redirect file does not redirect to the URL, escaped:\n%s", body)
	}
	cleanup()
	if _, err := os.Stat(page); !os.IsNotExist(err) {
		t.Errorf("the redirect file is still there after cleanup: %v", err)
	}
}

// TestBrowserCommand: without $BROWSER on Linux, a browser is opened only
// where there is a display.
func TestBrowserCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the display rule is for Linux and the BSDs")
	}
	t.Setenv("BROWSER", "")
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	if _, err := browserCommand(); err == nil || err.Error() != "no display" {
		t.Errorf("without a display: %v, want no display", err)
	}
	t.Setenv("BROWSER", "firefox")
	if cmd, err := browserCommand(); err != nil || len(cmd) != 1 || cmd[0] != "firefox" {
		t.Errorf("with $BROWSER: %v, %v", cmd, err)
	}
}
