//go:build historyupgradetest

package postgres

import "github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"

// With the tag historyupgradetest the server is the next release as far as
// the schema goes: one migration newer, which only this build has. The
// rolling-upgrade test (test/integration/history/upgrade_test.go) builds
// it to replace replicas of the ordinary build on one database.
func init() {
	schema.After = append(schema.After, sqlstore.Migration{
		Version: schema.Known() + 1,
		About:   "a column only the rolling-upgrade test's build adds",
		SQL:     `ALTER TABLE event_versions ADD COLUMN IF NOT EXISTS upgrade_test text`,
	})
}
