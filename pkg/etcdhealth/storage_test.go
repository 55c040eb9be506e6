package etcdhealth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// failingStore answers every call with its error, or, with block, waits
// for the call's context to end, as the etcd client does while it has no
// connection.
type failingStore struct {
	storage.Interface
	err   error
	block bool
	// entered, if set, is told when a call has reached the store.
	entered chan struct{}
}

func (f failingStore) answer(ctx context.Context) error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return f.err
}

func (f failingStore) Create(ctx context.Context, _ string, _, _ runtime.Object, _ uint64) error {
	return f.answer(ctx)
}

func (f failingStore) GetList(ctx context.Context, _ string, _ storage.ListOptions, _ runtime.Object) error {
	return f.answer(ctx)
}

func TestStorageErrors(t *testing.T) {
	notFound := storage.NewKeyNotFoundError("/registry/events/ns/x", 0)
	cases := []struct {
		name string
		err  error
		// want503 is whether the error becomes a 503; if not, it must come
		// back as it was.
		want503 bool
		// retryAfter is the 503's Retry-After, RetryAfterSeconds if zero.
		retryAfter int32
	}{
		{name: "connection lost", err: status.Error(codes.Unavailable, "error reading from server: EOF"), want503: true},
		{name: "wrapped", err: fmt.Errorf("creating lease: %w", status.Error(codes.Unavailable, "connection refused")), want503: true},
		{name: "in a storage InternalError", err: storage.NewInternalError(status.Error(codes.Unavailable, "EOF")), want503: true},
		{name: "no leader", err: rpctypes.ErrNoLeader, want503: true},
		{name: "database space exceeded", err: rpctypes.ErrNoSpace, want503: true, retryAfter: NoSpaceRetryAfterSeconds},
		{name: "database space exceeded, gRPC form", err: rpctypes.ErrGRPCNoSpace, want503: true, retryAfter: NoSpaceRetryAfterSeconds},
		{name: "database space exceeded, in a storage InternalError", err: storage.NewInternalError(rpctypes.ErrNoSpace), want503: true, retryAfter: NoSpaceRetryAfterSeconds},
		{name: "request timed out in etcd", err: rpctypes.ErrTimeout, want503: true},
		{name: "the request's own deadline", err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), want503: false},
		{name: "too large", err: rpctypes.ErrRequestTooLarge, want503: false},
		{name: "not found", err: notFound, want503: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate()
			s := g.Storage(failingStore{err: tc.err})
			err := s.Create(context.Background(), "/registry/events/ns/x", nil, nil, 0)
			if tc.want503 {
				if tc.retryAfter == 0 {
					tc.retryAfter = RetryAfterSeconds
				}
				assert503RetryAfter(t, err, tc.retryAfter)
				return
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("got %v, want the store's own error %v", err, tc.err)
			}
		})
	}
}

func TestStorageRefusesWhileClosed(t *testing.T) {
	g := NewGate()
	g.observe(nil)
	s := g.Storage(failingStore{block: true})
	g.observe(errors.New("down"))
	g.observe(errors.New("down"))
	// A blocking store would hold the call until its context ends: the gate
	// must answer first.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	assert503(t, s.GetList(ctx, "/registry/events", storage.ListOptions{}, nil))
	if ctx.Err() != nil {
		t.Fatal("the caller's context ended")
	}
}

func TestStorageEndsCallsWhenTheGateCloses(t *testing.T) {
	g := NewGate()
	g.observe(nil)
	entered := make(chan struct{})
	s := g.Storage(failingStore{block: true, entered: entered})
	done := make(chan error)
	go func() { done <- s.GetList(context.Background(), "/registry/events", storage.ListOptions{}, nil) }()
	<-entered
	g.observe(errors.New("down"))
	g.observe(errors.New("down"))
	assert503(t, <-done)
}

func assert503(t *testing.T, err error) {
	t.Helper()
	assert503RetryAfter(t, err, RetryAfterSeconds)
}

func assert503RetryAfter(t *testing.T, err error, retryAfter int32) {
	t.Helper()
	var statusErr apierrors.APIStatus
	if !errors.As(err, &statusErr) {
		t.Fatalf("got %v (%T), want a 503 Status", err, err)
	}
	st := statusErr.Status()
	if st.Code != http.StatusServiceUnavailable || st.Details == nil || st.Details.RetryAfterSeconds != retryAfter {
		t.Fatalf("got %+v, want 503 with Retry-After %d", st, retryAfter)
	}
}
