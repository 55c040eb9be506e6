package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

var databases atomic.Int64

// connect opens a connection to dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// newDatabase makes a database in the cluster at dsn and returns its DSN.
func newDatabase(t *testing.T, dsn string) string {
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
	// Base is noon: a cutoff at the start of Base's second day drops the first.
	cutoff := storetest.Base.Truncate(24 * time.Hour).Add(24 * time.Hour)
	n, err := s.Retain(ctx, cutoff, 0, 0)
	if err != nil || n != 10 {
		t.Fatalf("age retention dropped %d (%v), want the first day's 10", n, err)
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
