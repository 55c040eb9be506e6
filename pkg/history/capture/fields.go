package capture

import (
	"bytes"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// protoEnvelope starts every protobuf value the Kubernetes storage writes
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protoEnvelope = []byte("k8s\x00")

// Field numbers of k8s.io/api/core/v1 generated.proto (and of runtime.Unknown
// for the envelope) that history reads beside its columns, whose own are in
// history.Columns. Protobuf field numbers are the wire format's contract:
// they never change once released.
const (
	unknownTypeMeta   = 1 // runtime.Unknown.typeMeta
	unknownRaw        = 2 // runtime.Unknown.raw
	unknownEncoding   = 3 // runtime.Unknown.contentEncoding
	typeMetaVersion   = 1 // runtime.TypeMeta.apiVersion
	typeMetaKind      = 2 // runtime.TypeMeta.kind
	eventMetadata     = 1
	eventFirst        = 6
	eventLast         = 7
	eventTime         = 10
	eventSeries       = 11
	metaUID           = 5
	metaCreation      = 8
	seriesLastObserve = 2
	timeSeconds       = 1
	timeNanos         = 2
)

// reading is one Event's fields as versionFromProto finds them.
type reading struct {
	v                                         history.Version
	first, last, eventAt, created, seriesLast time.Time
}

var readings = sync.Pool{New: func() any { return new(reading) }}

// protoField is what a length-delimited field of a message holds: a value
// read (read), or a message whose fields hold more (fields, by number).
type protoField struct {
	read   func(r *reading, b []byte) bool
	fields []*protoField
}

// add places read at path below f.
func (f *protoField) add(read func(r *reading, b []byte) bool, path ...protowire.Number) {
	for _, num := range path {
		if int(num) >= len(f.fields) {
			f.fields = append(f.fields, make([]*protoField, int(num)+1-len(f.fields))...)
		}
		if f.fields[num] == nil {
			f.fields[num] = &protoField{}
		}
		f = f.fields[num]
	}
	f.read = read
}

// walk reads the fields of message b that f knows.
func (f *protoField) walk(r *reading, b []byte) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) bool {
		if typ != protowire.BytesType || int(num) >= len(f.fields) || f.fields[num] == nil {
			return true
		}
		if field := f.fields[num]; field.read != nil {
			return field.read(r, b)
		}
		return f.fields[num].walk(r, b)
	})
}

// eventFields is the core/v1 Event message as capture reads it: every
// history column where history.Columns says it is, and the uid and times.
var eventFields = func() *protoField {
	event := &protoField{}
	for i := range history.Columns {
		if history.Columns[i].Proto == nil {
			continue // not the Event's (the cluster)
		}
		value := history.Columns[i].Value
		event.add(func(r *reading, b []byte) bool { *value(&r.v) = string(b); return true }, history.Columns[i].Proto...)
	}
	event.add(func(r *reading, b []byte) bool { r.v.UID = string(b); return true }, eventMetadata, metaUID)
	readTime := func(at func(r *reading) *time.Time, micro bool) func(r *reading, b []byte) bool {
		return func(r *reading, b []byte) bool {
			t, ok := protoTime(b, micro)
			*at(r) = t
			return ok
		}
	}
	event.add(readTime(func(r *reading) *time.Time { return &r.created }, false), eventMetadata, metaCreation)
	event.add(readTime(func(r *reading) *time.Time { return &r.first }, false), eventFirst)
	event.add(readTime(func(r *reading) *time.Time { return &r.last }, false), eventLast)
	event.add(readTime(func(r *reading) *time.Time { return &r.eventAt }, true), eventTime)
	event.add(readTime(func(r *reading) *time.Time { return &r.seriesLast }, true), eventSeries, seriesLastObserve)
	return event
}()

// versionFromProto reads what history.NewVersion takes from a decoded Event
// straight from a core/v1 Event's protobuf, without decoding the rest
// (message, managed fields, annotations) or converting to the internal
// type: that decode and conversion cost capture as much CPU per version as
// the store's insert. It reports false for anything else (JSON, another
// kind, an encoding it does not expect, a malformed value), which the caller
// decodes the ordinary way; TestVersionFromProto holds it to NewVersion's
// answer on fuzzed Events.
func versionFromProto(value []byte, revision int64, observedAt time.Time) (history.Version, bool) {
	raw, ok := eventBytes(value)
	if !ok {
		return history.Version{}, false
	}
	// The readings are pooled: the table's readers are called as func
	// values, which escape analysis cannot follow, and one reading a
	// version was a 416-byte allocation on capture's hottest path.
	r := readings.Get().(*reading)
	defer readings.Put(r)
	*r = reading{v: history.Version{Revision: revision, ObservedAt: observedAt, Object: value}}
	if !eventFields.walk(r, raw) {
		return history.Version{}, false
	}
	v := r.v
	// history.LastSeen's order, over the same fields.
	switch {
	case !r.seriesLast.IsZero():
		v.LastSeen = r.seriesLast
	case !r.last.IsZero():
		v.LastSeen = r.last
	case !r.eventAt.IsZero():
		v.LastSeen = r.eventAt
	case !r.first.IsZero():
		v.LastSeen = r.first
	default:
		v.LastSeen = r.created
	}
	if v.LastSeen.IsZero() {
		v.LastSeen = observedAt
	}
	return v, true
}

// eventBytes returns the core/v1 Event message inside a storage envelope.
func eventBytes(value []byte) ([]byte, bool) {
	if !bytes.HasPrefix(value, protoEnvelope) {
		return nil, false
	}
	var apiVersion, kind, raw []byte
	encoded := false
	ok := eachField(value[len(protoEnvelope):], func(num protowire.Number, typ protowire.Type, b []byte) bool {
		if typ != protowire.BytesType {
			return true
		}
		switch num {
		case unknownTypeMeta:
			return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) bool {
				switch {
				case typ != protowire.BytesType:
				case num == typeMetaVersion:
					apiVersion = b
				case num == typeMetaKind:
					kind = b
				}
				return true
			})
		case unknownRaw:
			raw = b
		case unknownEncoding:
			encoded = len(b) > 0
		}
		return true
	})
	if !ok || encoded || string(apiVersion) != "v1" || string(kind) != "Event" {
		return nil, false
	}
	return raw, true
}

// protoTime reads a metav1.Time (micro false) or MicroTime as their
// Unmarshal does: no bytes is the zero time, a Time keeps whole seconds, a
// MicroTime microseconds.
func protoTime(b []byte, micro bool) (time.Time, bool) {
	if len(b) == 0 {
		return time.Time{}, true
	}
	var seconds, nanos int64
	ok := eachField(b, func(protowire.Number, protowire.Type, []byte) bool { return true },
		func(num protowire.Number, v uint64) {
			switch num {
			case timeSeconds:
				seconds = int64(v)
			case timeNanos:
				nanos = int64(int32(v))
			}
		})
	if !ok {
		return time.Time{}, false
	}
	if !micro {
		return time.Unix(seconds, 0), true
	}
	return time.Unix(seconds, int64(time.Duration(nanos).Truncate(time.Microsecond))), true
}

// eachField walks a message's fields, calling bytesField for each
// length-delimited one and, if given, varint for each varint; it stops with
// false at the first malformed field or when bytesField says false.
func eachField(b []byte, bytesField func(num protowire.Number, typ protowire.Type, b []byte) bool, varint ...func(num protowire.Number, v uint64)) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			field, n := protowire.ConsumeBytes(b)
			if n < 0 || !bytesField(num, typ, field) {
				return false
			}
			b = b[n:]
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			for _, f := range varint {
				f(num, v)
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return false
			}
			b = b[n:]
		}
	}
	return true
}
