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
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// KubernetesSource is the progress key of capture from kube-apiserver's
// Events API: its revisions are that API's resourceVersions. Replicas
// capturing from one cluster into one store share it, so one that restarts
// resumes from what any of them stored.
const KubernetesSource = "kubernetes-api/v1/events"

// errExpired says kube-apiserver no longer serves a watch from the
// resourceVersion capture resumes from (410 Gone).
var errExpired = errors.New("resourceVersion expired")

// errBehind says kube-apiserver's resourceVersion has stayed below the one
// capture resumes from for Config.BehindTimeout: its etcd was restored from
// a backup (or replaced). kube-apiserver serves Events from etcd directly
// by default (no watch cache for Events), and etcd accepts a watch from a
// future revision and stays silent until it gets there, then sends only
// the changes after it: capture would wait, and then skip every change in
// between, without an error. With a watch cache for Events the watch
// answers "Too large resource version" instead (504, cause
// ResourceVersionTooLarge, after the cacher waited 3 s), which one slow
// cache can also cause; so either way capture relists only once
// kube-apiserver's own resourceVersion, read by a consistent list, stays
// behind for the timeout.
var errBehind = errors.New("kube-apiserver's resourceVersion is behind history's")

// kubeEncoder writes Events as kube-apiserver stores them, core/v1
// protobuf in the k8s envelope, so that what the Kubernetes API source
// stores reads exactly as what the etcd source stores.
var kubeEncoder = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)

// followKube lists and watches core/v1 Events in all namespaces through
// kube-apiserver, which serves every Event whichever API wrote it
// (events.k8s.io/v1 Events are core Events in its storage), from the
// resourceVersion the store holds for KubernetesSource.
func (c *Capture) followKube(ctx context.Context) error {
	c.source = KubernetesSource
	stored, ok, err := c.cfg.Store.Progress(ctx, c.source)
	if err != nil {
		history.StoreErrors.Inc()
		return fmt.Errorf("reading history progress: %w", err)
	}
	var rv int64
	if ok {
		rv = stored
		capturedRevision(stored)
		c.storedUpTo(stored)
		klog.InfoS("Resuming Event history capture from the Kubernetes API", "resourceVersion", stored)
	} else if rv, err = c.relistKube(ctx, "start", 0); err != nil {
		return err
	}
	c.startedFrom(rv)
	for ctx.Err() == nil {
		next, err := c.watchKube(ctx, rv)
		if apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
			// A watch cache behind: a slow one, or a restored etcd.
			if behind, berr := c.behind(ctx, rv); berr != nil {
				return berr
			} else if behind {
				err = errBehind
			}
		}
		switch {
		case errors.Is(err, errExpired):
			klog.InfoS("kube-apiserver no longer serves Event changes from the history capture's resourceVersion "+
				"(410 Gone): listing all Events again; versions replaced meanwhile are not in history "+
				"(event_apiserver_history_capture_relist_lost_versions_total estimates how many)", "resourceVersion", next)
			next, err = c.relistKube(ctx, "expired", next)
		case errors.Is(err, errBehind):
			next, err = c.relistKube(ctx, "restored", next)
		}
		if err != nil {
			return err
		}
		rv = next
	}
	return nil
}

// behind reads kube-apiserver's current resourceVersion (a consistent list
// of one Event, which reads etcd's revision) and reports whether it has
// stayed below rv for Config.BehindTimeout.
func (c *Capture) behind(ctx context.Context, rv int64) (bool, error) {
	list, err := c.cfg.Kubernetes.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return false, fmt.Errorf("reading kube-apiserver's resourceVersion: %w", err)
	}
	current, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		return false, fmt.Errorf("reading kube-apiserver's resourceVersion %q: %w", list.ResourceVersion, err)
	}
	if current >= rv {
		c.behindSince = time.Time{}
		return false, nil
	}
	if c.behindSince.IsZero() {
		c.behindSince = time.Now()
		klog.V(1).InfoS("kube-apiserver's resourceVersion is behind history's", "resourceVersion", current,
			"historyResourceVersion", rv, "relistAfter", c.cfg.BehindTimeout)
	}
	if time.Since(c.behindSince) < c.cfg.BehindTimeout {
		return false, nil
	}
	c.behindSince = time.Time{}
	klog.InfoS("kube-apiserver's resourceVersion has stayed behind the one history captured up to: its etcd "+
		"was restored from a backup or replaced. Listing all Events again and resuming from kube-apiserver's "+
		"resourceVersion; Event versions written since the restore and replaced before this relist are not in "+
		"history (event_apiserver_history_capture_relist_lost_versions_total estimates how many)",
		"resourceVersion", current, "historyResourceVersion", rv, "behindFor", c.cfg.BehindTimeout)
	history.RelistRewoundRevisions.Add(float64(rv - current))
	return true, nil
}

// watchKube follows Events from rv until the queue is full, the watch ends
// or fails; it returns the resourceVersion to resume from.
func (c *Capture) watchKube(ctx context.Context, rv int64) (int64, error) {
	// As a reflector does: the server ends the watch after a while, so a
	// watch never outlives a kube-apiserver's rotation for long.
	timeout := int64((5*time.Minute + rand.N(5*time.Minute)).Seconds())
	w, err := c.cfg.Kubernetes.CoreV1().Events(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
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
	check := time.NewTicker(c.behindCheckInterval())
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
				behind, err := c.behind(ctx, rv)
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
		it, ok := c.kubeItem(ev.Type, event)
		if !ok {
			continue
		}
		EtcdRevisionSeen(it.revision)
		if !c.offer(ctx, it) {
			// Stop reading while the writer catches up: kube-apiserver
			// keeps what capture has not read in its watch cache, and
			// the watch resumes after it.
			w.Stop()
			if err := c.enqueue(ctx, it); err != nil {
				return rv, err
			}
			return it.revision, nil
		}
		rv = it.revision
	}
}

// behindCheckInterval is how often a quiet watch checks whether
// kube-apiserver is behind: a few times per BehindTimeout, at most every
// 15 s (one list of one Event).
func (c *Capture) behindCheckInterval() time.Duration {
	return min(c.cfg.BehindTimeout/4, 15*time.Second)
}

// kubeItem is the queue item for one watch event: a version, a deletion, or
// for a bookmark the bare resourceVersion, stored as progress only once
// everything queued before it is stored.
func (c *Capture) kubeItem(typ watch.EventType, event *corev1.Event) (item, bool) {
	rv, err := strconv.ParseInt(event.ResourceVersion, 10, 64)
	if err != nil || rv <= 0 {
		// kube-apiserver's resourceVersions are etcd revisions; anything
		// else would break resuming and ordering.
		klog.ErrorS(err, "Event with a resourceVersion that is not a revision; not in history",
			"namespace", event.Namespace, "name", event.Name, "resourceVersion", event.ResourceVersion)
		return item{}, false
	}
	now := time.Now()
	switch typ {
	case watch.Bookmark:
		return item{revision: rv, weight: itemOverhead}, true
	case watch.Deleted:
		// The deleted object carries the deletion's resourceVersion; its
		// last version was stored when it was written.
		d := history.Deletion{UID: string(event.UID), Revision: rv, At: now}
		return item{revision: rv, deletion: &d, weight: itemOverhead, received: now}, true
	default:
		v, ok := c.kubeVersion(event, rv, now)
		if !ok {
			return item{}, false
		}
		return item{revision: rv, version: &v, weight: int64(len(v.Object)) + itemOverhead, received: now}, true
	}
}

// kubeVersion encodes event as kube-apiserver stores it and describes it.
func (c *Capture) kubeVersion(event *corev1.Event, rv int64, now time.Time) (history.Version, bool) {
	var buf bytes.Buffer
	if err := kubeEncoder.Encode(event, &buf); err != nil {
		history.DecodeErrors.Inc()
		klog.ErrorS(err, "Cannot encode an Event for history", "namespace", event.Namespace, "name", event.Name)
		return history.Version{}, false
	}
	if v, ok := versionFromProto(buf.Bytes(), rv, now); ok {
		return v, true
	}
	history.DecodeErrors.Inc()
	klog.ErrorS(nil, "Cannot read an encoded Event for history", "namespace", event.Namespace, "name", event.Name)
	return history.Version{}, false
}

// relistKube reads every Event, one consistent list in pages, and returns
// the resourceVersion to watch from. After a 410 (reason "expired"),
// resumedFrom is where capture stood: an Event listed with a newer version
// changed while capture was away, and the versions in between were replaced
// unseen. Their number is estimated from the Events' counts and added to
// RelistLostVersions; Events created and deleted while away left nothing to
// count.
func (c *Capture) relistKube(ctx context.Context, reason string, resumedFrom int64) (int64, error) {
	history.Relists.WithLabelValues(reason).Inc()
	var live []string
	var changed, lost int64
	opts := metav1.ListOptions{Limit: c.cfg.RelistPageSize}
	var listRV int64
	for {
		list, err := c.cfg.Kubernetes.CoreV1().Events(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			// A continue token past compaction: the next try starts over.
			return 0, fmt.Errorf("listing Events for history: %w", err)
		}
		if listRV, err = strconv.ParseInt(list.ResourceVersion, 10, 64); err != nil {
			return 0, fmt.Errorf("listing Events for history: resourceVersion %q: %w", list.ResourceVersion, err)
		}
		for i := range list.Items {
			event := &list.Items[i]
			it, ok := c.kubeItem(watch.Added, event)
			if !ok {
				continue
			}
			switch {
			case reason == "expired" && it.revision > resumedFrom:
				changed++
				lost += c.lostBefore(ctx, event, it.version, true)
			case reason == "restored" && it.version != nil:
				// Revisions went back: whether an Event changed shows
				// only in its count against history's newest version.
				if n := c.lostBefore(ctx, event, it.version, false); n > 0 {
					changed++
					lost += n
				}
			}
			if err := c.enqueue(ctx, it); err != nil {
				return 0, err
			}
			live = append(live, string(event.UID))
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	last := item{revision: listRV, weight: itemOverhead}
	if reason == "expired" || reason == "restored" {
		// Events deleted while capture was away left no DELETED to see.
		// After a restore, every Event history holds up to where it
		// stood and kube-apiserver no longer has is gone.
		last.gone = &history.Gone{Revision: max(listRV, resumedFrom), Live: live, At: time.Now()}
		last.rewind = reason == "restored"
		last.weight += int64(len(live)) * 64
		history.RelistChangedEvents.Add(float64(changed))
		history.RelistLostVersions.Add(float64(lost))
	}
	if err := c.enqueue(ctx, last); err != nil {
		return 0, err
	}
	EtcdRevisionSeen(listRV)
	klog.InfoS("Read all Events for history", "reason", reason, "events", len(live), "resourceVersion", listRV,
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
func (c *Capture) lostBefore(ctx context.Context, event *corev1.Event, v *history.Version, revisionsOrdered bool) int64 {
	listed := occurrences(event.Count, event.Series)
	records, err := c.cfg.Store.List(ctx, history.Query{
		Conditions: []history.Condition{
			{Columns: []history.Column{history.ColumnNamespace}, Value: event.Namespace},
			{Columns: []history.Column{history.ColumnName}, Value: event.Name},
		},
		Limit: 1,
	})
	if err != nil {
		klog.ErrorS(err, "Cannot read history to estimate what a relist lost", "namespace", event.Namespace, "name", event.Name)
		return 0
	}
	if len(records) == 0 || records[0].UID != v.UID {
		// New while away: the occurrences before the listed one are lost.
		return listed - 1
	}
	if revisionsOrdered && records[0].Revision >= v.Revision {
		return 0
	}
	// A change without a new occurrence (a patched message) counts nothing.
	return max(listed-c.storedOccurrences(records[0].Object)-1, 0)
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

func (c *Capture) storedOccurrences(object []byte) int64 {
	obj, _, err := c.cfg.Decoder.Decode(object, nil, &core.Event{})
	e, ok := obj.(*core.Event)
	if err != nil || !ok {
		return 1
	}
	var series *corev1.EventSeries
	if e.Series != nil {
		series = &corev1.EventSeries{Count: e.Series.Count}
	}
	return occurrences(e.Count, series)
}

var _ runtime.Encoder = kubeEncoder
