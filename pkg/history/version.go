package history

import (
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// NewVersion describes the Event etcd held at revision as value.
func NewVersion(event *core.Event, revision int64, value []byte, observedAt time.Time) Version {
	v := Version{
		UID:        string(event.UID),
		Revision:   revision,
		LastSeen:   LastSeen(event),
		ObservedAt: observedAt,
		Object:     value,
	}
	for i := range Columns {
		if c := &Columns[i]; c.Event != nil {
			*c.Value(&v) = c.Event(event)
		}
	}
	if v.LastSeen.IsZero() {
		v.LastSeen = observedAt
	}
	return v
}

// LastSeen is when the Event last happened, read as `kubectl events` reads
// it: the series' last observation, else lastTimestamp, else eventTime,
// else firstTimestamp, else its creation. Zero when the Event has none.
func LastSeen(e *core.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}
