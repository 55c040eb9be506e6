package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

var databases atomic.Int64

// connect opens a connection to dsn, closed when the test ends.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newDatabase makes a database in the cluster at dsn and returns its DSN.
func newDatabase(t testing.TB, dsn string) string {
	t.Helper()
	name := fmt.Sprintf("history_%d", databases.Add(1))
	exec(t, dsn, "CREATE DATABASE "+name)
	return strings.Replace(dsn, "dbname=postgres", "dbname="+name, 1)
}

// openTest opens a store in a new database of the cluster at dsn.
func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), newDatabase(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	dsn := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) history.Store { return openTest(t, dsn) })
}

func TestRetainDropsDays(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, pgtest.Start(t))
	// Four days of versions, 10 a day, each 4 KiB.
	var versions []history.Version
	for d := 0; d < 4; d++ {
		for i := 0; i < 10; i++ {
			rev := int64(d*10 + i + 1)
			v := storetest.Version(fmt.Sprint("u", rev), rev, "p", d*24*60+i)
			v.Object = make([]byte, 4096)
			versions = append(versions, v)
		}
	}
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	// A second replica writing the same versions stores nothing more.
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, history.Query{})
	if err != nil || len(all) != 40 {
		t.Fatalf("%d versions (%v), want 40", len(all), err)
	}
	// An older replica dropped a day before the day's counts of all
	// namespaces existed: that day is counted there still, and goes with
	// the next day dropped.
	leftOver := storetest.Base.Add(-48*time.Hour).UnixNano() / int64(time.Hour)
	if _, err := s.d.pool.Exec(ctx, `INSERT INTO `+spelling.HourlyAll+` (hour, cluster, reason, type, regarding_kind, reporting_controller, n)
		VALUES ($1, '', 'Old', 'Normal', 'Pod', 'kubelet', 5)`, leftOver); err != nil {
		t.Fatal(err)
	}
	// Base is noon: a cutoff at the start of Base's second day drops the first.
	cutoff := storetest.Base.Truncate(24 * time.Hour).Add(24 * time.Hour)
	n, err := s.Retain(ctx, cutoff, 0, 0)
	if err != nil || n != 10 {
		t.Fatalf("age retention dropped %d (%v), want the first day's 10", n, err)
	}
	for _, table := range []string{spelling.Hourly, spelling.HourlyAll} {
		var counted, before int64
		if err := s.d.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0), count(*) FILTER (WHERE hour < $1) FROM `+table,
			cutoff.UnixNano()/int64(time.Hour)).Scan(&counted, &before); err != nil {
			t.Fatal(err)
		}
		if counted != 30 || before != 0 {
			t.Errorf("%s counts %d versions, %d hours before the cutoff: want the 30 left, none", table, counted, before)
		}
	}
	parts, err := s.d.partitions(ctx)
	if err != nil || len(parts) != 3 {
		t.Fatalf("%d partitions (%v), want 3", len(parts), err)
	}
	// The size limit drops the oldest days and never the newest.
	if _, err := s.Retain(ctx, time.Time{}, 1, 0); err != nil {
		t.Fatal(err)
	}
	left, err := s.List(ctx, history.Query{})
	if err != nil || len(left) != 10 || left[0].Revision != 40 {
		t.Fatalf("after size retention: %v (%v), want the last day's 10", storetest.Revisions(left), err)
	}
}

// TestJITOff: the store's sessions run without JIT compilation (Open), and
// a DSN that asks for it keeps it.
func TestJITOff(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	for _, tc := range []struct{ dsn, want string }{
		{dsn, "off"},
		{dsn + " jit=on", "on"},
	} {
		s, err := Open(ctx, tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var jit string
		err = s.d.pool.QueryRow(ctx, `SHOW jit`).Scan(&jit)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if jit != tc.want {
			t.Errorf("%q: jit is %s, want %s", tc.dsn, jit, tc.want)
		}
	}
}

// TestReadsLeaveWritesAConnection: with every read connection busy (as
// four counts of a long window keep them), capture's Write still gets a
// connection and commits (issue 45: capture never waits behind a reader).
func TestReadsLeaveWritesAConnection(t *testing.T) {
	ctx := context.Background()
	dsn := newDatabase(t, pgtest.Start(t))
	s := openTest(t, dsn)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The readers wait on an advisory lock this connection holds.
	holder := connect(t, dsn)
	const key = 4545
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	readers := int(s.d.read.Config().MaxConns)
	errs := make(chan error, readers)
	for range readers {
		go func() {
			var ok bool
			errs <- s.d.Read().QueryRow(ctx, `SELECT pg_advisory_xact_lock_shared(4545) IS NULL`).Scan(&ok)
		}()
	}
	defer func() {
		if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			t.Error(err)
		}
		for range readers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var waiting int
		err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&waiting)
		return waiting == readers, err
	})
	if err != nil {
		t.Fatalf("the %d readers never all waited: %v", readers, err)
	}
	if got := s.d.read.Stat().AcquiredConns(); got != int32(readers) {
		t.Fatalf("%d of the read pool's %d connections in use", got, readers)
	}
	// Without a pool of its own, Write would wait for a reader to finish:
	// never, until the lock is released below.
	writeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Write(writeCtx, history.Batch{Versions: []history.Version{storetest.Version("u1", 1, "p", 0)}}); err != nil {
		t.Fatalf("Write while every read connection is busy: %v", err)
	}
}
