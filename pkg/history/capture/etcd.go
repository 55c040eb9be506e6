package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// EtcdConfig configures an EtcdSource; zero values take the defaults.
type EtcdConfig struct {
	// Name labels the source's metrics; by default "etcd".
	Name string
	// Client is the source's own client of the events etcd (NewClient);
	// Close closes it.
	Client *clientv3.Client
	// Prefix is the Events key prefix, e.g. /registry/events/.
	Prefix string
	// RelistPageSize bounds one etcd range read of a relist.
	RelistPageSize int64
}

// EtcdSource follows the Events prefix of the events etcd with a watch of
// its own, with the previous value of each key: see the package doc.
type EtcdSource struct {
	cfg EtcdConfig
	// head is etcd's revision when ProgressKey read it, for the log.
	head int64
}

func NewEtcdSource(cfg EtcdConfig) *EtcdSource {
	if cfg.Name == "" {
		cfg.Name = "etcd"
	}
	if cfg.RelistPageSize <= 0 {
		cfg.RelistPageSize = defaultRelistPageSize
	}
	return &EtcdSource{cfg: cfg}
}

func (s *EtcdSource) Name() string { return s.cfg.Name }

// Close closes the source's etcd client.
func (s *EtcdSource) Close() error { return s.cfg.Client.Close() }

// ProgressKey belongs to one etcd cluster's revisions: a restored or new
// cluster starts over with a relist. Replicas on one cluster share it, so
// one that restarts resumes from what any of them stored.
func (s *EtcdSource) ProgressKey(ctx context.Context) (string, error) {
	head, err := s.cfg.Client.Get(ctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return "", fmt.Errorf("reading etcd: %w", err)
	}
	s.head = head.Header.Revision
	return fmt.Sprintf("etcd-cluster-%x%s", head.Header.ClusterId, s.cfg.Prefix), nil
}

// Start resumes after the stored revision; a new history starts from
// etcd's first revision while etcd still holds it, else with a relist.
func (s *EtcdSource) Start(ctx context.Context, stored int64, ok bool) (int64, error) {
	if ok {
		klog.InfoS("Resuming Event history capture", "source", s.cfg.Name, "revision", stored, "etcdRevision", s.head)
		return stored, nil
	}
	// A read at revision 1 fails once etcd has compacted any revision.
	_, err := s.cfg.Client.Get(ctx, s.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(1))
	switch {
	case err == nil:
		klog.InfoS("Starting Event history capture from etcd's first revision", "source", s.cfg.Name, "etcdRevision", s.head)
		return 0, nil
	case errors.Is(err, rpctypes.ErrCompacted):
		return 0, RelistError{Reason: "start"}
	default:
		return 0, fmt.Errorf("reading etcd: %w", err)
	}
}

// Watch follows etcd after revision after until the queue is full, the
// watch ends or fails; it returns the revision to resume after.
func (s *EtcdSource) Watch(ctx context.Context, sink *Sink, after int64) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := s.cfg.Client.Watch(clientv3.WithRequireLeader(wctx), s.cfg.Prefix,
		clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(after+1), clientv3.WithProgressNotify())
	for resp := range watch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			klog.InfoS("etcd compacted past the Event history capture's revision: reading all Events again; "+
				"versions replaced and compacted meanwhile are not in history",
				"source", s.cfg.Name, "resumeRevision", after+1, "compactRevision", resp.CompactRevision)
			return after, RelistError{Reason: "compacted"}
		}
		if err := resp.Err(); err != nil {
			return after, err
		}
		sink.Seen(resp.Header.Revision)
		if resp.IsProgressNotify() {
			if sink.Offer(ctx, Item{Revision: resp.Header.Revision}) {
				after = resp.Header.Revision
			}
			continue
		}
		full := false
		for _, ev := range resp.Events {
			it, ok := s.item(sink, ev)
			if !ok {
				continue
			}
			if !sink.Offer(ctx, it) {
				// Stop reading etcd while the writer catches up; the
				// rest of this response is already here, so keep it.
				full = true
				cancel()
				if err := sink.Enqueue(ctx, it); err != nil {
					return after, err
				}
			}
		}
		if n := len(resp.Events); n > 0 {
			after = resp.Events[n-1].Kv.ModRevision
		}
		if full {
			return after, nil
		}
	}
	if ctx.Err() != nil {
		return after, nil
	}
	return after, errors.New("etcd watch closed")
}

func (s *EtcdSource) item(sink *Sink, ev *clientv3.Event) (Item, bool) {
	now := time.Now()
	switch {
	case ev.Type == clientv3.EventTypePut:
		v, ok := s.version(sink, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, now)
		if !ok {
			return Item{}, false
		}
		return Item{Revision: ev.Kv.ModRevision, Version: &v}, true
	case ev.PrevKv != nil:
		prev, ok := s.version(sink, ev.Kv.Key, ev.PrevKv.Value, ev.PrevKv.ModRevision, now)
		if !ok {
			return Item{}, false
		}
		d := history.Deletion{UID: prev.UID, Revision: ev.Kv.ModRevision, At: now}
		return Item{Revision: ev.Kv.ModRevision, Deletion: &d}, true
	default:
		klog.InfoS("Event deleted without its previous value; its deletion is not in history", "key", string(ev.Kv.Key))
		return Item{}, false
	}
}

// version describes the Event stored as value: read from its protobuf
// fields when it is a core/v1 Event in the storage's envelope, as every
// value the Kubernetes storage writes is, else decoded in full.
func (s *EtcdSource) version(sink *Sink, key, value []byte, revision int64, now time.Time) (history.Version, bool) {
	if v, ok := versionFromProto(value, revision, now); ok {
		return v, true
	}
	event, err := sink.Decode(value)
	if err != nil {
		sink.DecodeFailed()
		klog.ErrorS(err, "Cannot decode an Event for history", "key", string(key))
		return history.Version{}, false
	}
	return history.NewVersion(event, revision, value, now), true
}

// Relist reads every Event at one revision and returns it.
func (s *EtcdSource) Relist(ctx context.Context, sink *Sink, reason string, _ int64) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(s.cfg.Prefix)
	key := s.cfg.Prefix
	var rev int64
	var live []string
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(s.cfg.RelistPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.cfg.Client.Get(ctx, key, opts...)
		if err != nil {
			return 0, fmt.Errorf("listing Events for history: %w", err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			it, ok := s.item(sink, &clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
			if !ok {
				continue
			}
			if err := sink.Enqueue(ctx, it); err != nil {
				return 0, err
			}
			live = append(live, it.Version.UID)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	last := Item{Revision: rev}
	if reason == "compacted" {
		// Events deleted while capture was away left no DELETE to see.
		// Only after a compaction: after a start the store's revisions may
		// belong to another etcd cluster.
		last.Gone = &history.Gone{Revision: rev, Live: live, At: time.Now()}
	}
	if err := sink.Enqueue(ctx, last); err != nil {
		return 0, err
	}
	sink.Seen(rev)
	klog.InfoS("Read all Events for history", "source", s.cfg.Name, "reason", reason, "events", len(live), "revision", rev)
	return rev, nil
}
