package framework

import "testing"

// TestMain: the framework's own tests start etcd and kube-apiserver, so they
// are gated like the integration tests (Main).
func TestMain(m *testing.M) { Main(m) }
