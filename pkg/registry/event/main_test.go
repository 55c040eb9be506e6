package event

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// TestMain silences klog for the whole test binary: validation logs
// duplicate errors, and the fuzz targets' millions of inputs need no log.
// It is done here, before any test starts, because klog.SetLogger is not
// safe while anything logs.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
