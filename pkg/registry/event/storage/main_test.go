package storage

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// TestMain silences klog for the whole test binary, before any test starts:
// klog.SetLogger is not safe while anything logs, and the etcd clients of
// these tests log from goroutines that outlive their test.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
