package app

import (
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// openBrowser opens url in the user's browser, where there is one, as
// Jupyter does: through a file only the user may read that redirects to
// it, so the token is on no command line (xdg-open's, the browser's) that
// other users of the machine can read in ps. The file is removed by
// cleanup, which is always safe to call.
func openBrowser(url string) (cleanup func(), err error) {
	cleanup = func() {}
	command, err := browserCommand()
	if err != nil {
		return cleanup, err
	}
	dir, err := os.MkdirTemp("", "kubectl-timeline-")
	if err != nil {
		return cleanup, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	page := filepath.Join(dir, "open.html")
	escaped := html.EscapeString(url)
	redirect := fmt.Sprintf("<!DOCTYPE html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0;url=%s\">\n<title>kubectl timeline</title>\n<p><a href=\"%s\">Open the timeline</a></p>\n", escaped, escaped)
	if err := os.WriteFile(page, []byte(redirect), 0o600); err != nil {
		return cleanup, err
	}
	cmd := exec.Command(command[0], append(command[1:], "file://"+filepath.ToSlash(page))...)
	if err := cmd.Start(); err != nil {
		return cleanup, err
	}
	// Reaped in the background: xdg-open and open return at once, and a
	// browser started by $BROWSER may run until the user closes it.
	go func() { _ = cmd.Wait() }()
	return cleanup, nil
}

// browserCommand is what opens a page here: $BROWSER where set, as
// Python's webbrowser and Go's own tools honour it; macOS's open;
// Windows' URL handler; elsewhere xdg-open, only with a display, since
// without one it may start a text browser inside this terminal.
func browserCommand() ([]string, error) {
	if b := os.Getenv("BROWSER"); b != "" {
		return []string{b}, nil
	}
	switch runtime.GOOS {
	case "darwin":
		return []string{"open"}, nil
	case "windows":
		return []string{"rundll32", "url.dll,FileProtocolHandler"}, nil
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return nil, errors.New("no display")
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return nil, errors.New("no xdg-open")
	}
	return []string{path}, nil
}
