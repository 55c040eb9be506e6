package etcd

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"k8s.io/klog/v2"
)

// TestLoggerWritesThroughKlog logs as etcd does and expects klog's lines,
// so that --logging-format applies to them, and nothing for the listener
// errors of a Close.
func TestLoggerWritesThroughKlog(t *testing.T) {
	var out bytes.Buffer
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	if err := flags.Set("logtostderr", "false"); err != nil {
		t.Fatal(err)
	}
	// An error line goes to each severity's output; one is enough.
	klog.SetOutput(io.Discard)
	klog.SetOutputBySeverity("INFO", &out)
	defer func() {
		klog.SetOutput(os.Stderr)
		_ = flags.Set("logtostderr", "true")
	}()

	closing := &atomic.Bool{}
	logger := newLogger(closing).With(zap.String("member", "default"))
	logger.Warn("below the level")
	logger.Error("failed to update storage version", zap.Error(errors.New("missing term information")))
	closing.Store(true)
	logger.Error(listenerStopped, zap.Error(errors.New("mux: server closed")))
	klog.Flush()

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "E") {
		t.Fatalf("want one error line, got %d:\n%s", len(lines), out.String())
	}
	for _, want := range []string{`"failed to update storage version"`, `component="etcd"`, `etcdCaller="etcd/logger_test.go:`, `member="default"`, `error="missing term information"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line lacks %s: %s", want, lines[0])
		}
	}
}
