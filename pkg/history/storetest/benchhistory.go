package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// BenchHistory is the history the stores' BenchmarkListOneObjectWeek
// query: Rows versions evenly spaced over the Span (two weeks) before End,
// each a core/v1 Event in etcd's protobuf envelope. Event k regards pod k mod
// Objects (one object
// per 100 versions, objects taking turns so that each one's Events spread
// over the whole span, as a long-lived pod's do) and has three versions, a
// series counted 1, 2, 3; one in ten of an object's Events also names
// another pod as related (a preemption), so the ...OrRelated selectors read
// both indexes. An Event leaves etcd an hour after its last version, as its
// lease expires: the file holds that deletion too, as capture records it.
type BenchHistory struct {
	Rows, Objects int
	End           time.Time
	Span          time.Duration
}

const benchVersionsPerEvent = 3

// NewBenchHistory is the history of rows versions up to end.
func NewBenchHistory(rows int, end time.Time) BenchHistory {
	return BenchHistory{Rows: rows, Objects: max(rows/100, 1), End: end, Span: 14 * 24 * time.Hour}
}

// At is when version j happened.
func (h BenchHistory) At(j int) time.Time {
	return h.End.Add(-h.Span + time.Duration(float64(h.Span)*float64(j)/float64(h.Rows)))
}

// Version j is etcd revision 2j+2; the odd revisions between are the
// deletions', which happen between versions as they do in etcd.
func benchRevision(j int) int64 { return int64(2*j + 2) }

// deletionRevision is the odd revision of a deletion at t: after the last
// version before t, before the first one from t.
func (h BenchHistory) deletionRevision(t time.Time) int64 {
	next := int(math.Ceil(float64(t.Sub(h.End.Add(-h.Span))) / float64(h.Span) * float64(h.Rows)))
	return int64(2*next + 1)
}

// BenchNamespace is the namespace of object's pod and its Events.
func BenchNamespace(object int) string { return fmt.Sprintf("ns-%d", object%1000) }

func benchEventUID(k int) string {
	return fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", uint32(k*2654435761), k)
}

// related is the pod Event k names as related, if any.
func (h BenchHistory) related(k int) (int, bool) {
	if (k/h.Objects)%10 != 0 || h.Objects < 2 {
		return 0, false
	}
	return (k%h.Objects + 1) % h.Objects, true
}

// Deletions is how many Events of h left etcd before its end.
func (h BenchHistory) Deletions() int {
	n := 0
	for j := benchVersionsPerEvent - 1; j < h.Rows; j += benchVersionsPerEvent {
		if h.At(j).Add(time.Hour).Before(h.End) {
			n++
		}
	}
	return n
}

var (
	backOffMessage   = strings.Repeat("Back-off restarting failed container ", 12)
	preemptedMessage = strings.Repeat("Preempted by a pod of higher priority on the node ", 9)
	// rareMessage is kubelet's for an image pull refused by TLS, the note
	// of one Event in benchRareEvery: the rare word a text search looks for
	// (SearchRareWordWeek).
	rareMessage = `Failed to pull image "registry.internal/shop/web:v2": rpc error: code = Unknown desc = failed to pull and unpack image: ` +
		`failed to resolve reference: x509: certificate signed by unknown authority`
)

const (
	// BenchRareWord is in the notes of one Event in benchRareEvery.
	BenchRareWord  = "x509"
	benchRareEvery = 3001
)

// BenchDecoder decodes stored values as the server's capture does
// (pkg/apiserver: the internal Event through the core install).
func BenchDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	return serializer.NewCodecFactory(scheme).UniversalDecoder(core.SchemeGroupVersion)
}

// Generate hands write the history in revision order, in batches of
// batchSize versions; an Event's deletion goes with its last version. Each
// version's columns are what capture derives from its value
// (history.NewVersion of the decoded Event), so they agree with the
// protobuf by construction.
func (h BenchHistory) Generate(batchSize int, write func(history.Batch) error) error {
	encoder := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)
	decoder := BenchDecoder()
	var payload bytes.Buffer
	event := &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		Type:     corev1.EventTypeWarning,
		Source:   corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
	var batch history.Batch
	for j := 0; j < h.Rows; j++ {
		k, n := j/benchVersionsPerEvent, j%benchVersionsPerEvent
		object := k % h.Objects
		seen, first := h.At(j), h.At(j-n)
		event.Name, event.Namespace = fmt.Sprintf("pod-%d.%016x", object, k), BenchNamespace(object)
		event.UID = types.UID(benchEventUID(k))
		event.CreationTimestamp = metav1.NewTime(first)
		event.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: event.Namespace,
			Name: fmt.Sprintf("pod-%d", object), UID: types.UID(BenchObjectUID(object))}
		event.Reason, event.Message, event.Related = "BackOff", backOffMessage, nil
		if r, ok := h.related(k); ok {
			event.Reason, event.Message = "Preempted", preemptedMessage
			event.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: BenchNamespace(r),
				Name: fmt.Sprintf("pod-%d", r), UID: types.UID(BenchObjectUID(r))}
		}
		if k%benchRareEvery == benchRareEvery/2 {
			event.Reason, event.Message = "Failed", rareMessage
		}
		event.Count = int32(n + 1)
		event.FirstTimestamp, event.LastTimestamp = metav1.NewTime(first), metav1.NewTime(seen)
		payload.Reset()
		if err := encoder.Encode(event, &payload); err != nil {
			return err
		}
		value := bytes.Clone(payload.Bytes())
		obj, _, err := decoder.Decode(value, nil, &core.Event{})
		if err != nil {
			return err
		}
		batch.Versions = append(batch.Versions, history.NewVersion(obj.(*core.Event), benchRevision(j), value, seen))
		if gone := seen.Add(time.Hour); n == benchVersionsPerEvent-1 && gone.Before(h.End) {
			batch.Deletions = append(batch.Deletions, history.Deletion{UID: string(event.UID), Revision: h.deletionRevision(gone), At: gone})
		}
		if len(batch.Versions) == batchSize || j == h.Rows-1 {
			if err := write(batch); err != nil {
				return err
			}
			batch = history.Batch{}
		}
	}
	return nil
}

// BenchObjectUID is the regarding uid of the benchmark history's object i.
func BenchObjectUID(i int) string {
	return fmt.Sprintf("%08x-1111-4222-8333-%012x", uint32(i*2654435761), i)
}

// ListOneObjectWeek measures the query an operator runs for "this pod's
// week" (regarding.uid, and regardingOrRelated.uid, since=168h, newest
// first, limit 500) in s, which holds h, for objects taken across the whole
// range. It reports p50 and p99, the versions a query finds and the store's
// bytes per version.
func ListOneObjectWeek(b *testing.B, s history.Store, h BenchHistory) {
	ctx := context.Background()
	stats, err := s.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		columns []history.Column
	}{
		{"regarding.uid", []history.Column{history.ColumnRegardingUID}},
		{"regardingOrRelated.uid", []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			latencies := make([]time.Duration, 0, b.N)
			found := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				query := history.Query{
					Conditions: []history.Condition{{Columns: tc.columns, Value: BenchObjectUID(i * 7919 % h.Objects)}},
					Since:      h.End.Add(-7 * 24 * time.Hour),
					Limit:      500,
				}
				t0 := time.Now()
				got, err := s.List(ctx, query)
				if err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(t0))
				found += len(got)
			}
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(found)/float64(b.N), "versions/query")
			b.ReportMetric(float64(stats.Bytes)/float64(stats.Rows), "bytes/version")
		})
	}
}

// HourlyDisagreements counts the hours and reasons whose hourly count
// (sqlstore.Hourly, in table hourly: the hourly counts, or those of all
// namespaces) is not the count of the versions
// (table versions) last seen in that hour with that reason: a bulk fill's
// check of the counts it made after its rows.
func HourlyDisagreements(versions, hourly string) string {
	return `SELECT count(*) FROM (SELECT last_seen / 3600000000000 AS hour, reason, count(*) AS n FROM ` + versions + ` GROUP BY 1, 2) v
		FULL JOIN (SELECT hour, reason, sum(n) AS n FROM ` + hourly + ` GROUP BY 1, 2) r USING (hour, reason)
		WHERE v.n IS DISTINCT FROM r.n`
}
