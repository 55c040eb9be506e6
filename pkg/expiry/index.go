package expiry

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// indexLabel names the watch cache index of the backstop. No field
// selector has it: only the backstop looks the index up.
const indexLabel = "eventapiserver.io/expiry"

// IndexName is the index's name in the watch cache.
var IndexName = storage.FieldIndex(indexLabel)

// bucketBits: an index value holds the Events of one TTL class whose
// resourceVersions share all but their low bucketBits bits. A pass reads the
// buckets from where it stopped to the newest revision that came due, so
// wider buckets mean fewer lookups on the first pass after a start (one per
// 4096 revisions of etcd's history: 244 at a million, 244k at a billion,
// each a map lookup in the cache) and more Events read again while a bucket
// is partly due (at most the bucket's Events of the class, once per pass
// that moves the class's due revision).
// Tests narrow it (export_test.go), so that a few writes span buckets.
var bucketBits = 12

func bucketOf(rev int64) int64 { return rev >> bucketBits }

// bucketEnd is the last revision of bucket b.
func bucketEnd(b int64) int64 { return (b+1)<<bucketBits - 1 }

func indexValue(class uint64, bucket int64) string {
	return strconv.FormatUint(class, 10) + "/" + strconv.FormatInt(bucket, 10)
}

// IndexFunc files each Event under its TTL class (by rules, as the Store's
// TTLFunc chose it) and the bucket of its resourceVersion, the etcd revision
// of its last write. Both are read off the object alone, as the cache's
// indexer requires: it computes an object's values again to remove it.
// Events of no TTL (a zero --event-ttl and no rule) are not indexed.
func IndexFunc(rules *ttl.Rules) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		e, ok := obj.(*core.Event)
		if !ok {
			return nil, fmt.Errorf("index %s: not an Event: %T", IndexName, obj)
		}
		class, rev, ok := classAndRevision(rules, e)
		if !ok {
			return nil, nil
		}
		return []string{indexValue(class, bucketOf(rev))}, nil
	}
}

func classAndRevision(rules *ttl.Rules, e *core.Event) (uint64, int64, bool) {
	class := rules.Seconds(e)
	if class == 0 {
		return 0, 0, false
	}
	rev, err := strconv.ParseInt(e.ResourceVersion, 10, 64)
	if err != nil || rev <= 0 {
		return 0, 0, false
	}
	return class, rev, true
}

// bucketSelector asks the cacher for one index value. The cacher takes the
// value from RequiresExactMatch (SelectionPredicate.MatcherIndex) and reads
// that bucket alone (watchCache.listLatestRV); its Matches then sees the
// field set of GetAttrs, which has no such field, so it matches everything
// the bucket holds. It is only ever given to the cache, never to etcd, where
// it would match every Event: Backstop.bucket lists through the cacher's
// delegator at resourceVersion 0, which a filtered list never leaves, and
// checks that each Event it gets belongs to the bucket.
type bucketSelector struct{ value string }

var _ fields.Selector = bucketSelector{}

func (s bucketSelector) Matches(fields.Fields) bool { return true }
func (s bucketSelector) Empty() bool                { return false }
func (s bucketSelector) RequiresExactMatch(field string) (string, bool) {
	if field == indexLabel {
		return s.value, true
	}
	return "", false
}
func (s bucketSelector) Transform(fields.TransformFunc) (fields.Selector, error) { return s, nil }
func (s bucketSelector) Requirements() fields.Requirements {
	return fields.Requirements{{Operator: selection.Equals, Field: indexLabel, Value: s.value}}
}
func (s bucketSelector) String() string                    { return indexLabel + "=" + s.value }
func (s bucketSelector) DeepCopySelector() fields.Selector { return s }
