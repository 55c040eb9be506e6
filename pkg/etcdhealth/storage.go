package etcdhealth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// Storage wraps an etcd3 store (below the watch cache, so that what the
// cache serves is untouched) so that a call that needs etcd fails fast
// while etcd is away, and an outage is always a 503:
//
//   - while the gate is closed, the call is refused at once;
//   - a call in flight when the gate closes ends then, not at its deadline:
//     the etcd client waits for a connection, and retries reads, until its
//     context ends;
//   - a call that fails because etcd is unreachable (gRPC Unavailable, as a
//     write sent as etcd dies gets) is a 503, where the generic server would
//     pass the client's raw error on as a 500.
//
// Watches are not gated: the watch cache's own watch reports errors in its
// stream and reconnects, and a watch resumed from etcd's history ends
// where etcd cannot serve it, for its client to resume (watchresume).
func (g *Gate) Storage(s storage.Interface) storage.Interface {
	g.mu.Lock()
	g.stores = append(g.stores, s)
	g.mu.Unlock()
	return &gatedStorage{Interface: s, gate: g}
}

type gatedStorage struct {
	storage.Interface
	gate *Gate
}

// do runs call unless the gate is closed, ending it if the gate closes.
func (s *gatedStorage) do(ctx context.Context, operation string, call func(context.Context) error) error {
	ctx, stop, err := s.gate.whileOpen(ctx)
	if err != nil {
		refusedTotal.WithLabelValues(operation, "closed").Inc()
		return err
	}
	defer stop()
	err = call(ctx)
	if err == nil {
		return nil
	}
	var down downError
	if errors.As(context.Cause(ctx), &down) {
		refusedTotal.WithLabelValues(operation, "outage").Inc()
		return unavailableError("etcd stopped answering while this request waited for it " +
			"(a write may still be applied if etcd had received it)")
	}
	if isNoSpace(err) {
		refusedTotal.WithLabelValues(operation, "nospace").Inc()
		return noSpaceError()
	}
	if isUnreachable(err) {
		refusedTotal.WithLabelValues(operation, "unavailable").Inc()
		return unavailableError(fmt.Sprintf("etcd is unreachable (%v)", err))
	}
	return err
}

// isNoSpace reports whether etcd refused a write because its database is
// over its quota (the NOSPACE alarm). The etcd3 store passes the client's
// error on as it is, which the generic server answers 500.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) ||
		strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error())
}

// NoSpaceRetryAfterSeconds is the Retry-After of writes refused while etcd
// is over its quota: space comes back only as Events expire (--event-ttl)
// and are compacted away, so there is no point in retrying within seconds.
const NoSpaceRetryAfterSeconds = 30

// noSpaceError is a 503 with Retry-After rather than a 507: the condition
// is the server's, not the request's, and passes by itself as Events
// expire; client-go retries a 503 with Retry-After, and reads keep being
// served meanwhile. It is the same contract as an etcd outage.
func noSpaceError() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusServiceUnavailable,
		Reason: metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("etcd is out of space (database space exceeded, NOSPACE alarm): writes are refused "+
			"until expired Events have been compacted away and the alarm disarmed, retry after %ds; reads are served",
			NoSpaceRetryAfterSeconds),
		Details: &metav1.StatusDetails{RetryAfterSeconds: NoSpaceRetryAfterSeconds},
	}}
}

// isUnreachable reports whether err says etcd could not be reached or could
// not serve: gRPC's Unavailable, which covers a broken connection and etcd's
// "no leader", "leader changed" and "request timed out". Other codes are
// answers (a bad request, a compacted revision), and a deadline is the
// request's own, answered 504 by the generic server.
func isUnreachable(err error) bool {
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Code() == codes.Unavailable
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}

func (s *gatedStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return s.do(ctx, "create", func(ctx context.Context) error {
		return s.Interface.Create(ctx, key, obj, out, ttl)
	})
}

func (s *gatedStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	return s.do(ctx, "delete", func(ctx context.Context) error {
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
	})
}

func (s *gatedStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	return s.do(ctx, "get", func(ctx context.Context) error {
		return s.Interface.Get(ctx, key, opts, objPtr)
	})
}

func (s *gatedStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	return s.do(ctx, "list", func(ctx context.Context) error {
		return s.Interface.GetList(ctx, key, opts, listObj)
	})
}

func (s *gatedStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return s.do(ctx, "update", func(ctx context.Context) error {
		return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	})
}

// GetCurrentResourceVersion is what a consistent list from the watch cache
// asks etcd first (kubectl's default list).
func (s *gatedStorage) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	var rv uint64
	err := s.do(ctx, "current_resource_version", func(ctx context.Context) error {
		var err error
		rv, err = s.Interface.GetCurrentResourceVersion(ctx)
		return err
	})
	return rv, err
}

func (s *gatedStorage) Stats(ctx context.Context) (storage.Stats, error) {
	var stats storage.Stats
	err := s.do(ctx, "stats", func(ctx context.Context) error {
		var err error
		stats, err = s.Interface.Stats(ctx)
		return err
	})
	return stats, err
}
