package storm

import (
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// reporter names who wrote an Event, for its buckets (key, userKey) and for
// metrics (controller).
//
// The names come from the client: core/v1 validation bounds neither
// source.component nor source.host, and anyone may pick a fresh
// reportingInstance for every write. So the keys are hashes of a fixed size,
// whatever the names' length, and they include the authenticated user, as
// kube's EventRateLimit has a User limit type for: one client cannot spend
// another's budget by naming its reporter, and every reporter of one user
// also spends that user's budget (userKey), so rotating names mints no
// fresh bursts.
type reporter struct {
	// key tells reporters apart: user, controller or component, and
	// instance or host.
	key string
	// userKey is the user's own bucket.
	userKey string
	// name is the reporter as a person reads it, cut to maxNameLength.
	name string
	// controller is the reporting controller or source component alone,
	// the part that is shared by all instances.
	controller string
}

// keySize is the bytes of a key kept in memory: 128 bits of SHA-256, so
// that no client finds two names with one key.
const keySize = 16

// maxNameLength bounds the reporter name quoted in a 429's message.
const maxNameLength = 256

// hashKey hashes the parts, each ended by a zero byte. It runs for every
// Event write, so it hashes one buffer, on the stack for the usual short
// names, rather than feed a heap-allocated hash.Hash part by part.
func hashKey(parts ...string) string {
	var buf [256]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return string(sum[:keySize])
}

// reporterOf picks the reporter fields the writer filled in. client-go's
// tools/events always sets reportingController and reportingInstance;
// tools/record copies source.component and source.host into them; only older
// or hand-made core/v1 writers leave them empty and fill source alone. The
// user alone is the last resort.
func reporterOf(event *core.Event, who user.Info) reporter {
	userName := ""
	if who != nil {
		userName = who.GetName()
	}
	var kind, controller, instance string
	switch {
	case event.ReportingController != "" || event.ReportingInstance != "":
		kind, controller, instance = "controller", event.ReportingController, event.ReportingInstance
	case event.Source.Component != "" || event.Source.Host != "":
		kind, controller, instance = "source", event.Source.Component, event.Source.Host
	default:
		kind = "user"
	}
	name := kind + "/" + userName
	if kind != "user" {
		name = controller + "/" + instance + " (user " + userName + ")"
	}
	if len(name) > maxNameLength {
		name = strings.ToValidUTF8(name[:maxNameLength], "?") + "..."
	}
	return reporter{
		key:        hashKey(kind, userName, controller, instance),
		userKey:    userKeyOf(userName),
		name:       name,
		controller: controller,
	}
}

// userKeyOf is the key of the user's own bucket.
func userKeyOf(userName string) string { return hashKey("user-budget", userName) }

// String is the reporter as a person reads it, for error messages.
func (r reporter) String() string { return r.name }

const (
	// classUnknown labels Events that name no controller.
	classUnknown = "unknown"
	// classOther labels controllers seen while maxClasses others are in use.
	classOther = "other"
	// maxClasses bounds the reporter label's values: controller names come
	// from clients, so a client inventing names must not create series
	// without end. Clusters have a few dozen controllers that write Events.
	maxClasses = 100
	// maxClassLength cuts long names; a qualified name is at most 316 bytes.
	maxClassLength = 64
	// classIdle is how long a label value must be unused before another
	// name may take its place: the first 100 names seen do not keep the
	// label for good.
	classIdle = 10 * time.Minute
)

// classes hands out metric label values for controller names: up to
// maxClasses in use at once as themselves, the rest as "other". A value
// unused for classIdle is reclaimed for a new name, and its series are
// deleted (forget), so the number of series stays bounded too.
type classes struct {
	mu     sync.Mutex
	known  map[string]time.Time
	now    func() time.Time
	forget func(class string)
}

func newClasses(now func() time.Time, forget func(class string)) *classes {
	return &classes{known: map[string]time.Time{}, now: now, forget: forget}
}

func (c *classes) of(controller string) string {
	if controller == "" {
		return classUnknown
	}
	if len(controller) > maxClassLength {
		controller = controller[:maxClassLength]
	}
	// core/v1 leaves source.component unchecked; label values must be UTF-8.
	controller = strings.ToValidUTF8(controller, "?")
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[controller]; ok {
		c.known[controller] = now
		return controller
	}
	if len(c.known) >= maxClasses && !c.reclaim(now) {
		return classOther
	}
	c.known[controller] = now
	return controller
}

// reclaim frees the least recently used label value if it has been idle
// for classIdle. A linear scan over at most maxClasses, only when full.
func (c *classes) reclaim(now time.Time) bool {
	oldest, oldestSeen := "", now
	for class, seen := range c.known {
		if seen.Before(oldestSeen) {
			oldest, oldestSeen = class, seen
		}
	}
	if oldest == "" || now.Sub(oldestSeen) < classIdle {
		return false
	}
	delete(c.known, oldest)
	if c.forget != nil {
		c.forget(oldest)
	}
	return true
}
