// Package testbed is the one way to run etcd (one member or a cluster),
// the reference kube-apiserver and event-apiserver as child processes on
// loopback, for the integration tests (test/integration/framework wraps it
// in t.Cleanup and t.Fatal) and the load tool (test/load). It takes a
// context and a directory for data and logs, never a testing.TB, so that a
// benchmark and a test start the same processes the same way.
//
// Each starter picks free ports, writes what the process needs (the
// kube-apiserver PKI, token file and service-account keys), starts it with
// its output appended to a log file, and waits for it to be ready; when a
// port picked as free was taken meanwhile ("address already in use" in the
// log) it starts over on new ports (retryOnPortClash). The context bounds
// the start only: a started process runs until it is stopped.
//
// Children get a parent-death signal where the kernel has one, so that
// they do not outlive a load tool or test binary that is killed (by
// `go test -timeout`, say).
package testbed
