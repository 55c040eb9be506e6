package capture_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
)

const prefix = "/registry/events/"

// flakyStore fails its first writes, as a store that is down for a while.
type flakyStore struct {
	history.Store
	failures atomic.Int64
}

func (s *flakyStore) Write(ctx context.Context, b history.Batch) error {
	if s.failures.Add(-1) >= 0 {
		return errors.New("store down")
	}
	return s.Store.Write(ctx, b)
}

// TestCapture puts Events straight into a real etcd, as any writer of the
// events etcd does, with a queue far smaller than what is written and a store
// that fails at first: back-pressure and retries lose nothing, and a second
// capture after a stop resumes and stores nothing twice.
func TestCapture(t *testing.T) {
	client := embeddedEtcd(t)
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store := &flakyStore{Store: s}
	store.failures.Store(3)
	run := func(ctx context.Context) (stop func()) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		c := capture.New(capture.NewEtcdSource(capture.EtcdConfig{Client: client, Prefix: prefix}), capture.Config{
			Store:         store,
			Decoder:       apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion),
			BatchSize:     7,
			BatchInterval: 10 * time.Millisecond,
			// About four Events: the reader stops and resumes its watch often.
			MaxQueueBytes: 4096,
		})
		go func() { defer close(done); c.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	ctx := context.Background()
	want := 0
	waitStored := func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := s.List(ctx, history.Query{})
			return err == nil && len(got) == want, nil
		})
		if err != nil {
			got, _ := s.List(ctx, history.Query{})
			t.Fatalf("history holds %d versions, want %d", len(got), want)
		}
	}

	stop := run(ctx)
	for i := 0; i < 100; i++ {
		putEvent(ctx, t, client, fmt.Sprint("e", i%40), int32(i/40+1))
		want++
	}
	if _, err := client.Delete(ctx, prefix+"ns/e0"); err != nil {
		t.Fatal(err)
	}
	waitStored()
	stop()

	// Written while no capture runs; the next resumes from the store.
	for i := 0; i < 20; i++ {
		putEvent(ctx, t, client, fmt.Sprint("late", i), 1)
		want++
	}
	stop = run(ctx)
	defer stop()
	waitStored()
	records, err := s.List(ctx, history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnName}, Value: "e0"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.DeletedAt == nil {
			t.Errorf("e0 at %d: not marked deleted", r.Revision)
		}
	}
}

// embeddedEtcd is the server's own embedded etcd, as pkg/ttl's and
// pkg/watchresume's tests use, so that the unit tier needs no etcd binary.
func embeddedEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	e, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: time.Second,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// putEvent writes the Event ns/name straight into etcd, as the Kubernetes
// storage stores it, and returns its revision.
func putEvent(ctx context.Context, t *testing.T, client *clientv3.Client, name string, count int32) int64 {
	t.Helper()
	event := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", UID: "pod"},
		Reason:         "R", Message: fmt.Sprint("count ", count), Count: count, LastTimestamp: metav1.Now(),
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(event, &buf); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Put(ctx, prefix+"ns/"+name, buf.String())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}
