package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Migration is one step of a database's schema, to Version from the one
// before. A released migration never changes: databases already past it
// do not run it again.
type Migration struct {
	Version int
	// About is logged when it runs.
	About string
	SQL   string
	// BreaksReads marks a migration after which a server that knows only
	// older versions would read the store wrongly (a column renamed or
	// given another meaning): such servers refuse to read it too. Adding a
	// column or an index breaks no read (a server reads the columns it
	// names), so such a migration leaves older servers reading.
	BreaksReads bool
}

// Schema is a database's migrations, forward only.
type Schema struct {
	// Before brings a database of a server from before Baseline's version
	// up to it (SQLite's files of versions 1 to 4), each step from the
	// version before its own. The Baseline script runs after them.
	Before []Migration
	// Baseline creates the schema at its version in a new database. It is
	// idempotent (IF NOT EXISTS throughout), so it also completes what
	// Before leaves and what servers before versions made (PostgreSQL).
	Baseline Migration
	// After are the migrations since the baseline, in order.
	After []Migration
}

// Known is the newest version the schema describes.
func (s Schema) Known() int {
	if len(s.After) > 0 {
		return s.After[len(s.After)-1].Version
	}
	return s.Baseline.Version
}

// Migrate brings the database to the newest schema version this server
// knows, under the dialect's lock (Dialect.Migrate), so replicas starting
// together take turns and the later ones find it done. A database already
// at a newer version is left as it is: the store then refuses to write it,
// and to read it too if a migration since broke reads (history.Schema).
func (s *Store) Migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migrated {
		return nil
	}
	known := s.schema.Known()
	var state history.Schema
	err := s.d.Migrate(ctx, func(tx Tx) error {
		version, readableFrom, err := s.d.Schema(ctx, tx)
		if err != nil {
			return err
		}
		state = history.Schema{Version: version, Known: known, ReadableFrom: readableFrom}
		if version >= known {
			return nil
		}
		run := func(m Migration) error {
			klog.InfoS("Migrating the Event history store's schema", "from", version, "to", m.Version, "migration", m.About)
			if err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrating the history schema to version %d (%s): %w", m.Version, m.About, err)
			}
			version = m.Version
			if m.BreaksReads {
				readableFrom = m.Version
			}
			return nil
		}
		if version < s.schema.Baseline.Version {
			for _, m := range s.schema.Before {
				if version > 0 && m.Version > version {
					if err := run(m); err != nil {
						return err
					}
				}
			}
			if err := run(s.schema.Baseline); err != nil {
				return err
			}
			readableFrom = s.schema.Baseline.Version
		}
		for _, m := range s.schema.After {
			if m.Version > version {
				if err := run(m); err != nil {
					return err
				}
			}
		}
		state.Version, state.ReadableFrom = version, readableFrom
		if err := tx.Exec(ctx, s.sql.setSchema, version, readableFrom); err != nil {
			return err
		}
		return s.d.Versioned(ctx, tx, version)
	})
	if err != nil {
		return fmt.Errorf("preparing the history schema: %w", err)
	}
	s.migrated = true
	s.setState(state)
	return nil
}

// setState records where the schema stands, publishes it and logs a
// refusal once when it begins. Callers hold s.mu.
func (s *Store) setState(state history.Schema) {
	was := s.state.WriteError()
	s.state = state
	history.PublishSchema(state)
	if err := state.WriteError(); err != nil && was == nil {
		reads := "served"
		if state.ReadError() != nil {
			reads = "refused"
		}
		klog.ErrorS(err, "Refusing to write Event history: a newer event-apiserver migrated the store past this server's schema",
			"storeVersion", state.Version, "serverVersion", state.Known, "readableFrom", state.ReadableFrom, "reads", reads)
	}
}

// Schema says where the store's schema stands for this server.
func (s *Store) Schema() history.Schema {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// writable migrates if that is still to do, and refuses a newer schema.
func (s *Store) writable(ctx context.Context) error {
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	return s.Schema().WriteError()
}

// readable migrates if that is still to do, and refuses a newer schema
// whose migrations broke reads. A store already refusing writes, which no
// write tells of later migrations, reads the version again first.
func (s *Store) readable(ctx context.Context) error {
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	if s.Schema().WriteError() != nil {
		var version, readableFrom int
		if err := s.d.Read().QueryRow(ctx, s.sql.schema).Scan(&version, &readableFrom); err != nil {
			return fmt.Errorf("reading the history schema's version: %w", err)
		}
		s.mu.Lock()
		if version != s.state.Version || readableFrom != s.state.ReadableFrom {
			s.setState(history.Schema{Version: version, Known: s.state.Known, ReadableFrom: readableFrom})
		}
		s.mu.Unlock()
	}
	return s.Schema().ReadError()
}

// checkSchema takes the schema version a write's transaction read with the
// feed's head, under the feed's lock: a newer server may have migrated
// since this one did.
func (s *Store) checkSchema(version, readableFrom int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if version != s.state.Version || readableFrom != s.state.ReadableFrom {
		s.setState(history.Schema{Version: version, Known: s.state.Known, ReadableFrom: readableFrom})
	}
	return s.state.WriteError()
}

// Baseline renders the part of a database's baseline schema that every
// database shares, from history.Columns (those not Added) and sp: the
// versions table and its indexes, the ends, capture's progress, the feed's
// head and floor, and the schema's own version row.
func Baseline(sp Spelling) string {
	var b strings.Builder
	idx := func(kind, name, table, columns, cond string) {
		if cond != "" {
			cond = " WHERE " + cond
		}
		fmt.Fprintf(&b, "CREATE %s IF NOT EXISTS %s ON %s (%s)%s;\n", kind, name, table, columns, cond)
	}
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\tuid %s NOT NULL,\n\trevision %s NOT NULL,\n", sp.Versions, sp.Text, sp.Int)
	for _, c := range history.Columns {
		if !c.Added {
			fmt.Fprintf(&b, "\t%s %s NOT NULL,\n", c.Name, sp.Text)
		}
	}
	fmt.Fprintf(&b, "\tlast_seen %[1]s NOT NULL,\n\tobserved_at %[1]s NOT NULL,\n\tobject %[2]s NOT NULL,\n\tseq %[1]s NOT NULL DEFAULT 0%[3]s;\n",
		sp.Int, sp.Bytes, sp.VersionsKey)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\tuid %s PRIMARY KEY,\n\trevision %[3]s NOT NULL,\n\tdeleted_at %[3]s NOT NULL,\n"+
		"\tseq %[3]s NOT NULL DEFAULT 0,\n\tfirst_seq %[3]s NOT NULL DEFAULT 0\n);\n", sp.Deletions, sp.Text, sp.Int)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\tsource %s PRIMARY KEY,\n\trevision %s NOT NULL\n);\n", sp.Progress, sp.Text, sp.Int)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\tid %s PRIMARY KEY CHECK (id = 1),\n\tposition %[3]s NOT NULL,\n\tfloor %[3]s NOT NULL\n);\n", sp.Feed, sp.ID, sp.Int)
	fmt.Fprintf(&b, "INSERT INTO %s (id, position, floor) VALUES (1, 1, 1) ON CONFLICT (id) DO NOTHING;\n", sp.Feed)
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS history_schema (\n\tid %s PRIMARY KEY CHECK (id = 1),\n\tversion %[2]s NOT NULL,\n"+
		"\treadable_from %[2]s NOT NULL\n);\n", sp.ID, sp.Int)
	b.WriteString(sp.Upgrade)
	versions := sp.Versions + "_by_"
	idx("INDEX", versions+"time", sp.Versions, "last_seen DESC, revision DESC", "")
	idx("INDEX", versions+"namespace", sp.Versions, "namespace, last_seen DESC, revision DESC", "")
	key := "INDEX"
	if sp.KeyUnique {
		key = "UNIQUE INDEX"
	}
	idx(key, versions+sp.KeyIndex, sp.Versions, "namespace, name, revision", "")
	for _, c := range history.Columns {
		if c.Narrowing && !c.Added {
			cond := ""
			if c.Sparse && sp.PartialSparse {
				// Query.Where says col != '' so that SQLite's planner
				// may use the index.
				cond = string(c.Name) + " != ''"
			}
			idx("INDEX", versions+string(c.Name), sp.Versions, string(c.Name)+", last_seen DESC, revision DESC", cond)
		}
	}
	// The feed's positions; rows stored before it (0) are never read by
	// position.
	idx("INDEX", versions+"seq", sp.Versions, "seq", "seq > 0")
	idx("INDEX", sp.Deletions+"_by_seq", sp.Deletions, "seq", "seq > 0")
	b.WriteString(sp.Extra)
	return b.String()
}
