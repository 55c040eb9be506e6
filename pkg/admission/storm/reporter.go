package storm

import (
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// reporter names who wrote an Event, for its buckets (key) and for metrics
// (class).
type reporter struct {
	// key tells reporters apart: controller or component and instance or
	// host, as many as there are nodes and replicas.
	key string
	// controller is the reporting controller or source component alone,
	// the part that is shared by all instances.
	controller string
}

// reporterOf picks the reporter fields the writer filled in. client-go's
// tools/events always sets reportingController and reportingInstance;
// tools/record copies source.component and source.host into them; only older
// or hand-made core/v1 writers leave them empty and fill source alone. The
// user is the last resort, so that anonymous-looking Events share a budget
// per client instead of one budget for the whole cluster.
func reporterOf(event *core.Event, who user.Info) reporter {
	switch {
	case event.ReportingController != "" || event.ReportingInstance != "":
		return reporter{
			key:        "controller\x00" + event.ReportingController + "\x00" + event.ReportingInstance,
			controller: event.ReportingController,
		}
	case event.Source.Component != "" || event.Source.Host != "":
		return reporter{
			key:        "source\x00" + event.Source.Component + "\x00" + event.Source.Host,
			controller: event.Source.Component,
		}
	case who != nil:
		return reporter{key: "user\x00" + who.GetName()}
	default:
		return reporter{key: "unknown"}
	}
}

// String is the reporter as a person reads it, for error messages.
func (r reporter) String() string {
	b := []byte(r.key)
	for i, c := range b {
		if c == 0 {
			b[i] = '/'
		}
	}
	return string(b)
}

const (
	// classUnknown labels Events that name no controller.
	classUnknown = "unknown"
	// classOther labels controllers seen after maxClasses others.
	classOther = "other"
	// maxClasses bounds the reporter label's values: controller names come
	// from clients, so a client inventing names must not create series
	// without end. Clusters have a few dozen controllers that write Events.
	maxClasses = 100
	// maxClassLength cuts long names; a qualified name is at most 316 bytes.
	maxClassLength = 64
)

// classes hands out metric label values for controller names, the first
// maxClasses distinct ones as themselves and the rest as "other".
type classes struct {
	mu    sync.Mutex
	known map[string]struct{}
}

func newClasses() *classes {
	return &classes{known: map[string]struct{}{}}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.known[controller]; ok {
		return controller
	}
	if len(c.known) >= maxClasses {
		return classOther
	}
	c.known[controller] = struct{}{}
	return controller
}
