package capture

import (
	"bytes"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// protoEnvelope starts every protobuf value the Kubernetes storage writes
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protoEnvelope = []byte("k8s\x00")

// Field numbers of k8s.io/api/core/v1 generated.proto (and of runtime.Unknown
// for the envelope) that history reads. Protobuf field numbers are the wire
// format's contract: they never change once released.
const (
	unknownTypeMeta   = 1 // runtime.Unknown.typeMeta
	unknownRaw        = 2 // runtime.Unknown.raw
	unknownEncoding   = 3 // runtime.Unknown.contentEncoding
	typeMetaVersion   = 1 // runtime.TypeMeta.apiVersion
	typeMetaKind      = 2 // runtime.TypeMeta.kind
	eventMetadata     = 1
	eventInvolved     = 2
	eventReason       = 3
	eventFirst        = 6
	eventLast         = 7
	eventType         = 9
	eventTime         = 10
	eventSeries       = 11
	eventRelated      = 13
	eventReporting    = 14
	metaName          = 1
	metaNamespace     = 3
	metaUID           = 5
	metaCreation      = 8
	refKind           = 1
	refNamespace      = 2
	refName           = 3
	refUID            = 4
	seriesLastObserve = 2
	timeSeconds       = 1
	timeNanos         = 2
)

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
	v := history.Version{Revision: revision, ObservedAt: observedAt, Object: value}
	var first, last, eventAt, created, seriesLast time.Time
	ok = eachField(raw, func(num protowire.Number, typ protowire.Type, b []byte) bool {
		if typ != protowire.BytesType {
			return true
		}
		switch num {
		case eventMetadata:
			return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) bool {
				if typ != protowire.BytesType {
					return true
				}
				switch num {
				case metaName:
					v.Name = string(b)
				case metaNamespace:
					v.Namespace = string(b)
				case metaUID:
					v.UID = string(b)
				case metaCreation:
					var ok bool
					created, ok = protoTime(b, false)
					return ok
				}
				return true
			})
		case eventInvolved:
			return reference(b, &v.RegardingKind, &v.RegardingNamespace, &v.RegardingName, &v.RegardingUID)
		case eventRelated:
			var kind, namespace string
			return reference(b, &kind, &namespace, &v.RelatedName, &v.RelatedUID)
		case eventReason:
			v.Reason = string(b)
		case eventType:
			v.Type = string(b)
		case eventReporting:
			v.ReportingController = string(b)
		case eventFirst, eventLast, eventTime:
			t, ok := protoTime(b, num == eventTime)
			switch num {
			case eventFirst:
				first = t
			case eventLast:
				last = t
			default:
				eventAt = t
			}
			return ok
		case eventSeries:
			return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) bool {
				if num == seriesLastObserve && typ == protowire.BytesType {
					var ok bool
					seriesLast, ok = protoTime(b, true)
					return ok
				}
				return true
			})
		}
		return true
	})
	if !ok {
		return history.Version{}, false
	}
	// history.LastSeen's order, over the same fields.
	switch {
	case !seriesLast.IsZero():
		v.LastSeen = seriesLast
	case !last.IsZero():
		v.LastSeen = last
	case !eventAt.IsZero():
		v.LastSeen = eventAt
	case !first.IsZero():
		v.LastSeen = first
	default:
		v.LastSeen = created
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

// reference reads an ObjectReference's kind, namespace, name and uid.
func reference(b []byte, kind, namespace, name, uid *string) bool {
	return eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) bool {
		if typ != protowire.BytesType {
			return true
		}
		switch num {
		case refKind:
			*kind = string(b)
		case refNamespace:
			*namespace = string(b)
		case refName:
			*name = string(b)
		case refUID:
			*uid = string(b)
		}
		return true
	})
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
