// Package process starts the programs a benchmark compares, etcd,
// kube-apiserver and event-apiserver, configured as the benchmark runs them,
// as child processes on loopback (internal/proc), each with its output in a
// log file under the benchmark's directory.
package process
