package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
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

// benchHistory is the history BenchmarkListOneObjectWeek queries: rows
// versions evenly spaced over the two weeks before end, each a core/v1 Event
// in etcd's protobuf envelope. Event k regards pod k mod objects (one object
// per 100 versions, objects taking turns so that each one's Events spread
// over the whole span, as a long-lived pod's do) and has three versions, a
// series counted 1, 2, 3; one in ten of an object's Events also names
// another pod as related (a preemption), so the ...OrRelated selectors read
// both indexes. An Event leaves etcd an hour after its last version, as its
// lease expires: the file holds that deletion too, as capture records it.
type benchHistory struct {
	rows, objects int
	end           time.Time
	span          time.Duration
}

const benchVersionsPerEvent = 3

func newBenchHistory(rows int, end time.Time) benchHistory {
	return benchHistory{rows: rows, objects: max(rows/100, 1), end: end, span: 14 * 24 * time.Hour}
}

// at is when version j happened.
func (h benchHistory) at(j int) time.Time {
	return h.end.Add(-h.span + time.Duration(float64(h.span)*float64(j)/float64(h.rows)))
}

// Version j is etcd revision 2j+2; the odd revisions between are the
// deletions', which happen between versions as they do in etcd.
func benchRevision(j int) int64 { return int64(2*j + 2) }

// deletionRevision is the odd revision of a deletion at t: after the last
// version before t, before the first one from t.
func (h benchHistory) deletionRevision(t time.Time) int64 {
	next := int(math.Ceil(float64(t.Sub(h.end.Add(-h.span))) / float64(h.span) * float64(h.rows)))
	return int64(2*next + 1)
}

func benchNamespace(object int) string { return fmt.Sprintf("ns-%d", object%1000) }

func benchEventUID(k int) string {
	return fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", uint32(k*2654435761), k)
}

// related is the pod Event k names as related, if any.
func (h benchHistory) related(k int) (int, bool) {
	if (k/h.objects)%10 != 0 || h.objects < 2 {
		return 0, false
	}
	return (k%h.objects + 1) % h.objects, true
}

// deletions is how many Events of h left etcd before its end.
func (h benchHistory) deletions() int {
	n := 0
	for j := benchVersionsPerEvent - 1; j < h.rows; j += benchVersionsPerEvent {
		if h.at(j).Add(time.Hour).Before(h.end) {
			n++
		}
	}
	return n
}

var (
	backOffMessage   = strings.Repeat("Back-off restarting failed container ", 12)
	preemptedMessage = strings.Repeat("Preempted by a pod of higher priority on the node ", 9)
)

// benchDecoder decodes stored values as the server's capture does
// (pkg/apiserver: the internal Event through the core install).
func benchDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	return serializer.NewCodecFactory(scheme).UniversalDecoder(core.SchemeGroupVersion)
}

// generate hands write the history in revision order, in batches of
// batchSize versions; an Event's deletion goes with its last version. Each
// version's columns are what capture derives from its value
// (history.NewVersion of the decoded Event), so they agree with the
// protobuf by construction.
func (h benchHistory) generate(batchSize int, write func(history.Batch) error) error {
	encoder := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)
	decoder := benchDecoder()
	var payload bytes.Buffer
	event := &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		Type:     corev1.EventTypeWarning,
		Source:   corev1.EventSource{Component: "kubelet", Host: "node-1"},
	}
	var batch history.Batch
	for j := 0; j < h.rows; j++ {
		k, n := j/benchVersionsPerEvent, j%benchVersionsPerEvent
		object := k % h.objects
		seen, first := h.at(j), h.at(j-n)
		event.Name, event.Namespace = fmt.Sprintf("pod-%d.%016x", object, k), benchNamespace(object)
		event.UID = types.UID(benchEventUID(k))
		event.CreationTimestamp = metav1.NewTime(first)
		event.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: event.Namespace,
			Name: fmt.Sprintf("pod-%d", object), UID: types.UID(BenchObjectUID(object))}
		event.Reason, event.Message, event.Related = "BackOff", backOffMessage, nil
		if r, ok := h.related(k); ok {
			event.Reason, event.Message = "Preempted", preemptedMessage
			event.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: benchNamespace(r),
				Name: fmt.Sprintf("pod-%d", r), UID: types.UID(BenchObjectUID(r))}
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
		if gone := seen.Add(time.Hour); n == benchVersionsPerEvent-1 && gone.Before(h.end) {
			batch.Deletions = append(batch.Deletions, history.Deletion{UID: string(event.UID), Revision: h.deletionRevision(gone), At: gone})
		}
		if len(batch.Versions) == batchSize || j == h.rows-1 {
			if err := write(batch); err != nil {
				return err
			}
			batch = history.Batch{}
		}
	}
	return nil
}

// fillWrite writes h into s the way capture does: through Write, every index
// in place, in batches of 5000.
func fillWrite(ctx context.Context, s *Store, h benchHistory, source string) error {
	if err := h.generate(5000, func(b history.Batch) error { return s.Write(ctx, b) }); err != nil {
		return err
	}
	return s.Write(ctx, history.Batch{Source: source, Revision: int64(h.rows)})
}

// fillBulk writes h into a new store at path as capture would have left it
// (through Write, so the same rows, row counter and deletions; the server's
// own schema and indexes), at a bulk load's speed: the secondary indexes are
// dropped while the rows go in, in key order, in large batches with no
// journal and no fsync, and the schema then builds them with CREATE INDEX,
// which sorts each index once instead of inserting 10^7 keys at random
// places of eight B-trees through a 32 MiB cache. The file is back in WAL
// mode when it returns; the progress row, written last, says it is complete.
// A fill that stops half way leaves a file with no journal to recover: it
// is refused, not reused.
func fillBulk(ctx context.Context, path string, h benchHistory, source string, logf func(string, ...any)) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	var rows int64
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'versions'`).Scan(&rows); err != nil {
		return err
	}
	if rows != 0 {
		return fmt.Errorf("%s already holds %d versions, not from a complete fill: remove it", path, rows)
	}
	indexes, err := secondaryIndexes(ctx, s.db)
	if err != nil {
		return err
	}
	for _, name := range indexes {
		if _, err := s.db.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			return err
		}
	}
	// s.db is one connection (and s.read has none yet), so these hold for
	// every write below and the journal mode can change.
	if err := pragma(ctx, s.db, "journal_mode = OFF", "off"); err != nil {
		return err
	}
	// An exclusive lock keeps the page cache between transactions, which
	// SQLite otherwise drops (and frees page by page) when it unlocks.
	if err := pragma(ctx, s.db, "locking_mode = EXCLUSIVE", "exclusive"); err != nil {
		return err
	}
	for _, p := range []string{"synchronous = OFF", "cache_size = -1048576"} {
		if _, err := s.db.ExecContext(ctx, "PRAGMA "+p); err != nil {
			return err
		}
	}
	start := time.Now()
	written := 0
	err = h.generate(50000, func(b history.Batch) error {
		if err := s.Write(ctx, b); err != nil {
			return err
		}
		written += len(b.Versions)
		if written%(h.rows/10+1) < len(b.Versions) {
			logf("%d versions inserted in %v", written, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	logf("%d versions inserted in %v; building %d indexes", h.rows, time.Since(start).Round(time.Second), len(indexes))
	indexStart := time.Now()
	if _, err := s.db.ExecContext(ctx, schema); err != nil {
		return err
	}
	logf("indexes built in %v", time.Since(indexStart).Round(time.Second))
	if err := s.Write(ctx, history.Batch{Source: source, Revision: int64(h.rows)}); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return err
	}
	if err := pragma(ctx, s.db, "journal_mode = WAL", "wal"); err != nil {
		return err
	}
	if err := pragma(ctx, s.db, "locking_mode = NORMAL", "normal"); err != nil {
		return err
	}
	logf("filled %s in %v", path, time.Since(start).Round(time.Second))
	return s.Close()
}

// secondaryIndexes are the indexes the schema declares (not the primary
// keys' own).
func secondaryIndexes(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// pragma sets a pragma that answers with its new value, and checks it.
func pragma(ctx context.Context, db *sql.DB, set, want string) error {
	var got string
	if err := db.QueryRowContext(ctx, "PRAGMA "+set).Scan(&got); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("PRAGMA %s: still %q", set, got)
	}
	return nil
}

// verifyBenchDB checks a filled file as the server sees it: the row counter
// against count(*), the deletions, and for sample objects every selector of
// "one object's history" (through List, so through the indexes) against a
// scan of the whole table that reads no index, each scanned row's columns
// against its decoded Event.
func verifyBenchDB(ctx context.Context, s *Store, h benchHistory, sample int, logf func(string, ...any)) error {
	start := time.Now()
	stats, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	var count, deletions int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM versions`).Scan(&count); err != nil {
		return err
	}
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM deletions`).Scan(&deletions); err != nil {
		return err
	}
	if stats.Rows != int64(h.rows) || count != int64(h.rows) || deletions != int64(h.deletions()) {
		return fmt.Errorf("counter %d, count(*) %d, deletions %d: want %d versions and %d deletions",
			stats.Rows, count, deletions, h.rows, h.deletions())
	}

	objects := make([]int, 0, sample)
	var names, uids []any
	for i := 0; i < sample; i++ {
		o := i * 7919 % h.objects
		objects = append(objects, o)
		uids = append(uids, BenchObjectUID(o))
		names = append(names, fmt.Sprintf("pod-%d", o))
	}
	in := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")" }
	scan := strings.Replace(selectRecord, "FROM versions v ", "FROM versions v NOT INDEXED ", 1) +
		` WHERE v.regarding_uid IN ` + in(sample) + ` OR v.related_uid IN ` + in(sample) +
		` OR v.regarding_name IN ` + in(sample) + ` OR v.related_name IN ` + in(sample)
	rows, err := s.read.QueryContext(ctx, scan, append(append(append(append([]any{}, uids...), uids...), names...), names...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	decoder := benchDecoder()
	var scanned []history.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return err
		}
		obj, _, err := decoder.Decode(r.Object, nil, &core.Event{})
		if err != nil {
			return fmt.Errorf("version %d: %w", r.Revision, err)
		}
		want := history.NewVersion(obj.(*core.Event), r.Revision, r.Object, r.ObservedAt)
		want.LastSeen = want.LastSeen.UTC()
		if !reflect.DeepEqual(want, r.Version) {
			return fmt.Errorf("version %d: columns %+v disagree with its Event's %+v", r.Revision, r.Version, want)
		}
		scanned = append(scanned, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	since := h.end.Add(-7 * 24 * time.Hour)
	queried := 0
	for _, o := range objects {
		uid, name := BenchObjectUID(o), fmt.Sprintf("pod-%d", o)
		for _, c := range []struct {
			selector   string
			conditions []history.Condition
		}{
			{"regarding.uid", []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: uid}}},
			{"related.uid", []history.Condition{{Columns: []history.Column{history.ColumnRelatedUID}, Value: uid}}},
			{"regardingOrRelated.uid", []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: uid}}},
			{"regarding.name", []history.Condition{{Columns: []history.Column{history.ColumnRegardingName}, Value: name}}},
			{"regardingOrRelated.name", []history.Condition{{Columns: []history.Column{history.ColumnRegardingName, history.ColumnRelatedName}, Value: name}}},
			{"namespace and regarding.uid", []history.Condition{
				{Columns: []history.Column{history.ColumnNamespace}, Value: benchNamespace(o)},
				{Columns: []history.Column{history.ColumnRegardingUID}, Value: uid}}},
		} {
			q := history.Query{Conditions: c.conditions, Since: since, Limit: 500}
			got, err := s.List(ctx, q)
			if err != nil {
				return err
			}
			var want []history.Record
			for _, r := range scanned {
				if matches(r.Version, c.conditions) && !r.LastSeen.Before(since) {
					want = append(want, r)
				}
			}
			sort.Slice(want, func(i, j int) bool {
				if !want[i].LastSeen.Equal(want[j].LastSeen) {
					return want[i].LastSeen.After(want[j].LastSeen)
				}
				return want[i].Revision > want[j].Revision
			})
			want = want[:min(len(want), q.Limit)]
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("object %d, %s: List found %d versions, the scan %d (or they differ)", o, c.selector, len(got), len(want))
			}
			if c.selector == "regarding.uid" && len(got) == 0 {
				return fmt.Errorf("object %d has no version in the last week", o)
			}
			queried += len(got)
		}
	}
	logf("verified %s: %d versions counted, %d deletions, %d versions of %d objects scanned, %d found by 6 selectors agree, in %v",
		"the history", count, deletions, len(scanned), sample, queried, time.Since(start).Round(time.Second))
	return nil
}

// matches is Query.Where's condition, in Go.
func matches(v history.Version, conditions []history.Condition) bool {
	column := map[history.Column]string{
		history.ColumnNamespace: v.Namespace, history.ColumnRegardingUID: v.RegardingUID,
		history.ColumnRegardingName: v.RegardingName, history.ColumnRelatedUID: v.RelatedUID,
		history.ColumnRelatedName: v.RelatedName,
	}
	for _, c := range conditions {
		any := false
		for _, col := range c.Columns {
			value, ok := column[col]
			if !ok {
				panic("matches: no column " + col)
			}
			any = any || value == c.Value
		}
		if !any {
			return false
		}
	}
	return true
}
