package history

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/server/healthz"
)

// ErrSchemaNewer is the refusal of a store whose schema a newer server
// migrated past what this one knows: it would write rows the new schema
// reads wrongly (docs/operations.md, rolling upgrades).
var ErrSchemaNewer = errors.New("the history store's schema is newer than this server knows")

// Schema is where a store's schema stands for this server.
type Schema struct {
	// Version is the store's schema version; 0 until the store was reached.
	Version int
	// Known is the newest version this server knows and migrates to.
	Known int
	// ReadableFrom is the oldest server version that still reads the store
	// correctly: migrations that only add columns or indexes keep it, one
	// that changes what a server reads raises it.
	ReadableFrom int
}

// WriteError is ErrSchemaNewer when the store is ahead of this server, which
// then writes nothing: no version, no progress, no retention.
func (s Schema) WriteError() error {
	if s.Version <= s.Known {
		return nil
	}
	return fmt.Errorf("%w: it is at version %d, this server knows up to %d: this replica writes no history until it is "+
		"replaced by a newer event-apiserver", ErrSchemaNewer, s.Version, s.Known)
}

// ReadError is ErrSchemaNewer when the store is ahead of this server by a
// migration that changed what a server reads; reads are safe otherwise.
func (s Schema) ReadError() error {
	if s.Version <= s.Known || s.ReadableFrom <= s.Known {
		return nil
	}
	return fmt.Errorf("%w: it is at version %d, readable by servers of version %d and later, this server knows up to %d",
		ErrSchemaNewer, s.Version, s.ReadableFrom, s.Known)
}

// SchemaCheck is the /readyz check event-history-schema: it fails, saying
// why, while the store's schema is newer than this server knows, so that
// a rollout towards an older build stops before its replicas take over
// from the newer ones, and replicas left behind by a rollout are seen.
func SchemaCheck(store Store) healthz.HealthChecker {
	return healthz.NamedCheck("event-history-schema", func(*http.Request) error {
		return store.Schema().WriteError()
	})
}
