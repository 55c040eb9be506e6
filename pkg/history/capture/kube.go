package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// KubernetesProgressKey is the progress key of capture from
// kube-apiserver's Events API: its revisions are that API's
// resourceVersions. Replicas capturing from one cluster into one store share
// it, so one that restarts resumes from what any of them stored.
const KubernetesProgressKey = "kubernetes-api/v1/events"

const defaultBehindTimeout = 90 * time.Second

// KubernetesConfig configures a KubernetesSource; zero values take the
// defaults.
type KubernetesConfig struct {
	// Name labels the source's metrics; by default "kubernetes".
	Name string
	// ProgressKey is where the store keeps the resourceVersion the source
	// is captured up to; by default KubernetesProgressKey. Each cluster
	// capturing into one store needs its own.
	ProgressKey string
	Client      kubernetes.Interface
	// RelistPageSize bounds one page of a relist.
	RelistPageSize int64
	// BehindTimeout is how long kube-apiserver's resourceVersion may stay
	// below the one capture resumes from (its etcd restored from a backup)
	// before capture drops it and lists all Events again.
	BehindTimeout time.Duration
	// EventMetrics counts the Events the watch reads (not a relist's);
	// nil counts nothing.
	EventMetrics *eventmetrics.Counter
}

// KubernetesSource lists and watches core/v1 Events in all namespaces
// through kube-apiserver, which serves every Event whichever API wrote it
// (events.k8s.io/v1 Events are core Events in its storage).
type KubernetesSource struct {
	cfg KubernetesConfig
	// behindSince is when kube-apiserver was first seen behind the
	// resourceVersion capture resumes from; zero while it is not.
	behindSince time.Time
}

func NewKubernetesSource(cfg KubernetesConfig) *KubernetesSource {
	if cfg.Name == "" {
		cfg.Name = "kubernetes"
	}
	if cfg.ProgressKey == "" {
		cfg.ProgressKey = KubernetesProgressKey
	}
	if cfg.RelistPageSize <= 0 {
		cfg.RelistPageSize = defaultRelistPageSize
	}
	if cfg.BehindTimeout <= 0 {
		cfg.BehindTimeout = defaultBehindTimeout
	}
	return &KubernetesSource{cfg: cfg}
}

func (s *KubernetesSource) Name() string { return s.cfg.Name }

func (s *KubernetesSource) ProgressKey(context.Context) (string, error) {
	return s.cfg.ProgressKey, nil
}

// errExpired says kube-apiserver no longer serves a watch from the
// resourceVersion capture resumes from (410 Gone): a relist with reason
// "expired".
var errExpired = errors.New("resourceVersion expired")

// errBehind says kube-apiserver's resourceVersion has stayed below the one
// capture resumes from for BehindTimeout: its etcd was restored from
// a backup (or replaced). kube-apiserver serves Events from etcd directly
// by default (no watch cache for Events), and etcd accepts a watch from a
// future revision and stays silent until it gets there, then sends only
// the changes after it: capture would wait, and then skip every change in
// between, without an error. With a watch cache for Events the watch
// answers "Too large resource version" instead (504, cause
// ResourceVersionTooLarge, after the cacher waited 3 s), which one slow
// cache can also cause; so either way capture relists only once
// kube-apiserver's own resourceVersion, read by a consistent list, stays
// behind for the timeout, then with reason "restored".
var errBehind = errors.New("kube-apiserver's resourceVersion is behind history's")

// kubeEncoder writes Events as kube-apiserver stores them, core/v1
// protobuf in the k8s envelope, so that what the Kubernetes API source
// stores reads exactly as what the etcd source stores.
var kubeEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

// Start resumes the watch from the stored resourceVersion; without one,
// capture starts with a relist.
func (s *KubernetesSource) Start(_ context.Context, stored int64, ok bool) (int64, error) {
	if !ok {
		return 0, RelistError{Reason: "start"}
	}
	klog.InfoS("Resuming Event history capture from the Kubernetes API", "source", s.cfg.Name, "resourceVersion", stored)
	return stored, nil
}

// Watch follows Events from rv until the queue is full, the watch ends or
// fails; it returns the resourceVersion to resume from, and asks for a
// relist when kube-apiserver no longer serves changes from there (410) or
// is behind it.
func (s *KubernetesSource) Watch(ctx context.Context, sink *Sink, rv int64) (int64, error) {
	next, err := s.watch(ctx, sink, rv)
	if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		// A watch cache behind: a slow one, or a restored etcd.
		if behind, berr := s.behind(ctx, sink, rv); berr != nil {
			return next, berr
		} else if behind {
			err = errBehind
		}
	}
	switch {
	case errors.Is(err, errExpired):
		klog.InfoS("kube-apiserver no longer serves Event changes from the history capture's resourceVersion "+
			"(410 Gone): listing all Events again; versions replaced meanwhile are not in history "+
			"(event_apiserver_history_capture_relist_lost_versions_total estimates how many)", "source", s.cfg.Name, "resourceVersion", next)
		return next, RelistError{Reason: "expired"}
	case errors.Is(err, errBehind):
		return next, RelistError{Reason: "restored"}
	}
	return next, err
}

// behind reads kube-apiserver's current resourceVersion (a consistent list
// of one Event, which reads etcd's revision) and reports whether it has
// stayed below rv for BehindTimeout; then it counts the revisions the
// relist will rewind.
func (s *KubernetesSource) behind(ctx context.Context, sink *Sink, rv int64) (bool, error) {
	list, err := s.cfg.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, fmt.Errorf("reading kube-apiserver's resourceVersion: %w", err)
	}
	current, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		return false, fmt.Errorf("reading kube-apiserver's resourceVersion %q: %w", list.ResourceVersion, err)
	}
	if current >= rv {
		s.behindSince = time.Time{}
		return false, nil
	}
	if s.behindSince.IsZero() {
		s.behindSince = time.Now()
		klog.V(1).InfoS("kube-apiserver's resourceVersion is behind history's", "source", s.cfg.Name, "resourceVersion", current,
			"historyResourceVersion", rv, "relistAfter", s.cfg.BehindTimeout)
	}
	if time.Since(s.behindSince) < s.cfg.BehindTimeout {
		return false, nil
	}
	s.behindSince = time.Time{}
	klog.InfoS("kube-apiserver's resourceVersion has stayed behind the one history captured up to: its etcd "+
		"was restored from a backup or replaced. Listing all Events again and resuming from kube-apiserver's "+
		"resourceVersion; Event versions written since the restore and replaced before this relist are not in "+
		"history (event_apiserver_history_capture_relist_lost_versions_total estimates how many)",
		"source", s.cfg.Name, "resourceVersion", current, "historyResourceVersion", rv, "behindFor", s.cfg.BehindTimeout)
	sink.Rewound(rv - current)
	return true, nil
}

// watch follows Events from rv until the queue is full, the watch ends or
// fails; it returns the resourceVersion to resume from.
func (s *KubernetesSource) watch(ctx context.Context, sink *Sink, rv int64) (int64, error) {
	// As a reflector does: the server ends the watch after a while, so a
	// watch never outlives a kube-apiserver's rotation for long.
	timeout := int64((5*time.Minute + rand.N(5*time.Minute)).Seconds())
	w, err := s.cfg.Client.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
		ResourceVersion:     strconv.FormatInt(rv, 10),
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return rv, errExpired
		}
		return rv, fmt.Errorf("watching Events: %w", err)
	}
	defer w.Stop()
	// A watch with nothing to say may be one from a future revision, which
	// etcd keeps silent (errBehind): while it is quiet, capture checks.
	check := time.NewTicker(s.behindCheckInterval())
	defer check.Stop()
	quiet := true
	for {
		var ev watch.Event
		var open bool
		select {
		case ev, open = <-w.ResultChan():
			quiet = false
		case <-check.C:
			if quiet {
				behind, err := s.behind(ctx, sink, rv)
				if err != nil {
					return rv, err
				}
				if behind {
					return rv, errBehind
				}
			}
			quiet = true
			continue
		case <-ctx.Done():
			return rv, nil
		}
		if !open {
			return rv, nil
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return rv, errExpired
			}
			return rv, fmt.Errorf("watching Events: %w", err)
		}
		event, ok := ev.Object.(*corev1.Event)
		if !ok {
			return rv, fmt.Errorf("watching Events: unexpected %T", ev.Object)
		}
		it, ok := s.item(sink, ev.Type, event)
		if !ok {
			continue
		}
		if it.Version != nil {
			s.cfg.EventMetrics.Captured(s.cfg.Name, ev.Type == watch.Added, event)
		}
		sink.Seen(it.Revision)
		if !sink.Offer(ctx, it) {
			// Stop reading while the writer catches up: kube-apiserver
			// keeps what capture has not read in its watch cache, and
			// the watch resumes after it.
			w.Stop()
			if err := sink.Enqueue(ctx, it); err != nil {
				return rv, err
			}
			return it.Revision, nil
		}
		rv = it.Revision
	}
}

// behindCheckInterval is how often a quiet watch checks whether
// kube-apiserver is behind: a few times per BehindTimeout, at most every
// 15 s (one list of one Event).
func (s *KubernetesSource) behindCheckInterval() time.Duration {
	return min(s.cfg.BehindTimeout/4, 15*time.Second)
}

// item is the queue item for one watch event: a version, a deletion, or
// for a bookmark the bare resourceVersion, stored as progress only once
// everything queued before it is stored.
func (s *KubernetesSource) item(sink *Sink, typ watch.EventType, event *corev1.Event) (Item, bool) {
	rv, err := strconv.ParseInt(event.ResourceVersion, 10, 64)
	if err != nil || rv <= 0 {
		// kube-apiserver's resourceVersions are etcd revisions; anything
		// else would break resuming and ordering.
		klog.ErrorS(err, "Event with a resourceVersion that is not a revision; not in history",
			"source", s.cfg.Name, "namespace", event.Namespace, "name", event.Name, "resourceVersion", event.ResourceVersion)
		return Item{}, false
	}
	now := time.Now()
	switch typ {
	case watch.Bookmark:
		return Item{Revision: rv}, true
	case watch.Deleted:
		// The deleted object carries the deletion's resourceVersion; its
		// last version was stored when it was written.
		d := history.Deletion{UID: string(event.UID), Revision: rv, At: now}
		return Item{Revision: rv, Deletion: &d}, true
	default:
		v, ok := s.version(sink, event, rv, now)
		if !ok {
			return Item{}, false
		}
		return Item{Revision: rv, Version: &v}, true
	}
}

// version encodes event as kube-apiserver stores it and describes it.
func (s *KubernetesSource) version(sink *Sink, event *corev1.Event, rv int64, now time.Time) (history.Version, bool) {
	var buf bytes.Buffer
	if err := kubeEncoder.Encode(event, &buf); err != nil {
		sink.DecodeFailed()
		klog.ErrorS(err, "Cannot encode an Event for history", "source", s.cfg.Name, "namespace", event.Namespace, "name", event.Name)
		return history.Version{}, false
	}
	if v, ok := versionFromProto(buf.Bytes(), rv, now); ok {
		return v, true
	}
	sink.DecodeFailed()
	klog.ErrorS(nil, "Cannot read an encoded Event for history", "source", s.cfg.Name, "namespace", event.Namespace, "name", event.Name)
	return history.Version{}, false
}

// Relist reads every Event, one consistent list in pages, and returns the
// resourceVersion to watch from. After a 410 (reason "expired"),
// resumedFrom is where capture stood: an Event listed with a newer version
// changed while capture was away, and the versions in between were replaced
// unseen. Their number is estimated from the Events' counts and counted
// through sink.Lost; Events created and deleted while away left nothing to
// count.
func (s *KubernetesSource) Relist(ctx context.Context, sink *Sink, reason string, resumedFrom int64) (int64, error) {
	var live []string
	var changed, lost int64
	opts := metav1.ListOptions{Limit: s.cfg.RelistPageSize}
	var listRV int64
	for {
		list, err := s.cfg.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			// A continue token past compaction: the next try starts over.
			return 0, fmt.Errorf("listing Events for history: %w", err)
		}
		if listRV, err = strconv.ParseInt(list.ResourceVersion, 10, 64); err != nil {
			return 0, fmt.Errorf("listing Events for history: resourceVersion %q: %w", list.ResourceVersion, err)
		}
		for i := range list.Items {
			event := &list.Items[i]
			it, ok := s.item(sink, watch.Added, event)
			if !ok {
				continue
			}
			switch {
			case reason == "expired" && it.Revision > resumedFrom:
				changed++
				lost += s.lostBefore(ctx, sink, event, it.Version, true)
			case reason == "restored" && it.Version != nil:
				// Revisions went back: whether an Event changed shows
				// only in its count against history's newest version.
				if n := s.lostBefore(ctx, sink, event, it.Version, false); n > 0 {
					changed++
					lost += n
				}
			}
			if err := sink.Enqueue(ctx, it); err != nil {
				return 0, err
			}
			live = append(live, string(event.UID))
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	last := Item{Revision: listRV}
	if reason == "expired" || reason == "restored" {
		// Events deleted while capture was away left no DELETED to see.
		// After a restore, every Event history holds up to where it
		// stood and kube-apiserver no longer has is gone.
		last.Gone = &history.Gone{Revision: max(listRV, resumedFrom), Live: live, At: time.Now()}
		last.Rewind = reason == "restored"
		sink.Lost(changed, lost)
	}
	if err := sink.Enqueue(ctx, last); err != nil {
		return 0, err
	}
	sink.Seen(listRV)
	klog.InfoS("Read all Events for history", "source", s.cfg.Name, "reason", reason, "events", len(live), "resourceVersion", listRV,
		"changedWhileAway", changed, "lostVersionsEstimate", lost)
	return listRV, nil
}

// lostBefore estimates how many versions of event were written after the
// newest one history holds and before the listed one (v), from the
// occurrences the Event counts: a core/v1 recorder writes one version per
// occurrence (count), an events.k8s.io/v1 recorder one for the first and
// one each time it updates its series (series.count, the occurrences so
// far), less often than it counts, so there it is an upper estimate.
// revisionsOrdered says history's revisions and v's are one sequence (not
// so after a restore), so a newer stored one means nothing was lost.
func (s *KubernetesSource) lostBefore(ctx context.Context, sink *Sink, event *corev1.Event, v *history.Version, revisionsOrdered bool) int64 {
	listed := occurrences(event.Count, event.Series)
	newest, ok, err := sink.Newest(ctx, event.Namespace, event.Name)
	if err != nil {
		klog.ErrorS(err, "Cannot read history to estimate what a relist lost", "source", s.cfg.Name, "namespace", event.Namespace, "name", event.Name)
		return 0
	}
	if !ok || newest.UID != v.UID {
		// New while away: the occurrences before the listed one are lost.
		return listed - 1
	}
	if revisionsOrdered && newest.Revision >= v.Revision {
		return 0
	}
	// A change without a new occurrence (a patched message) counts nothing.
	return max(listed-storedOccurrences(sink, newest.Object)-1, 0)
}

// occurrences is how many times an Event happened: its count, or its
// series' count, and at least once.
func occurrences(count int32, series *corev1.EventSeries) int64 {
	n := int64(max(count, 1))
	if series != nil {
		n = max(n, int64(series.Count))
	}
	return n
}

func storedOccurrences(sink *Sink, object []byte) int64 {
	e, err := sink.Decode(object)
	if err != nil {
		return 1
	}
	var series *corev1.EventSeries
	if e.Series != nil {
		series = &corev1.EventSeries{Count: e.Series.Count}
	}
	return occurrences(e.Count, series)
}

var _ runtime.Encoder = kubeEncoder
