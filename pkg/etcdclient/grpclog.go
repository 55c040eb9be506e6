package etcdclient

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

// QuietAbandonedDials makes gRPC's log, which k8s.io/apiserver's etcd3
// package sends to klog (storage/etcd3/logger.go), say at verbosity 2
// instead of as a warning that a connection attempt was abandoned.
//
// Every etcd client (etcd v3.6 with gRPC 1.79) starts its channel with the
// pick_first balancer, then its resolver's service config switches it to
// round_robin, which shuts down pick_first's subchannel while it is still
// dialing: gRPC warns "addrConn.createTransport failed to connect ... dial
// tcp ...: operation was canceled" (with a DNS name, "lookup <name>:
// operation was canceled"; with TLS, "authentication handshake failed:
// context canceled"), or "use of closed network connection", once per
// client, and a replacement subchannel connects a moment later. A server
// start opens about seven clients, k8s.io/apiserver's own among them (the
// storage, its compactor, the health and readiness checks), so every start
// logged seven such warnings that meant nothing (issue 36). The clients made
// here start with round_robin (New), so they never do it; the generic
// server's clients cannot be given dial options. Failures to reach etcd
// (refused, timed out, unknown host, TLS) are still warnings.
func QuietAbandonedDials() {
	grpclog.SetLoggerV2(quietLogger{})
}

// abandonedDial is whether a gRPC warning only says that gRPC gave up a
// connection attempt itself.
func abandonedDial(msg string) bool {
	return strings.Contains(msg, "addrConn.createTransport failed to connect") &&
		(strings.Contains(msg, "operation was canceled") || strings.Contains(msg, "use of closed network connection") ||
			strings.Contains(msg, "handshake failed: context canceled"))
}

// quietLogger is k8s.io/apiserver's klogWrapper (storage/etcd3/logger.go)
// but for abandoned dials.
type quietLogger struct{}

const quietLoggerDepth = 4

func (quietLogger) Info(args ...any) {
	if v := klog.V(5); v.Enabled() {
		v.InfoSDepth(quietLoggerDepth, fmt.Sprint(args...))
	}
}

func (quietLogger) Infoln(args ...any) {
	if v := klog.V(5); v.Enabled() {
		v.InfoSDepth(quietLoggerDepth, fmt.Sprintln(args...))
	}
}

func (quietLogger) Infof(format string, args ...any) {
	if v := klog.V(5); v.Enabled() {
		v.InfoSDepth(quietLoggerDepth, fmt.Sprintf(format, args...))
	}
}

func (quietLogger) warn(msg string) {
	if abandonedDial(msg) {
		if v := klog.V(2); v.Enabled() {
			v.InfoSDepth(quietLoggerDepth+1, msg)
		}
		return
	}
	klog.WarningDepth(quietLoggerDepth+1, msg)
}

func (l quietLogger) Warning(args ...any)                 { l.warn(fmt.Sprint(args...)) }
func (l quietLogger) Warningln(args ...any)               { l.warn(fmt.Sprintln(args...)) }
func (l quietLogger) Warningf(format string, args ...any) { l.warn(fmt.Sprintf(format, args...)) }

func (quietLogger) Error(args ...any)   { klog.ErrorDepth(quietLoggerDepth, args...) }
func (quietLogger) Errorln(args ...any) { klog.ErrorDepth(quietLoggerDepth, fmt.Sprintln(args...)) }
func (quietLogger) Errorf(format string, args ...any) {
	klog.ErrorDepth(quietLoggerDepth, fmt.Sprintf(format, args...))
}

func (quietLogger) Fatal(args ...any)   { klog.FatalDepth(quietLoggerDepth, args...) }
func (quietLogger) Fatalln(args ...any) { klog.FatalDepth(quietLoggerDepth, fmt.Sprintln(args...)) }
func (quietLogger) Fatalf(format string, args ...any) {
	klog.FatalDepth(quietLoggerDepth, fmt.Sprintf(format, args...))
}

func (quietLogger) V(l int) bool { return klog.V(klog.Level(l)).Enabled() }
