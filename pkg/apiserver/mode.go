package apiserver

// Mode is what the server serves and whom it trusts. cmd/event-apiserver
// decides it once from its flags (--aggregated, --history-only); whatever
// differs between modes asks the mode. Where a standalone server's etcd
// runs, embedded or external, is a property of the mode, not a mode.
type Mode int

const (
	// Standalone serves the Events API to the clients pointed at it, with
	// its own admin token.
	Standalone Mode = iota
	// Aggregated serves the Events API behind kube-apiserver, as the
	// APIService of events.k8s.io/v1, over an external etcd that
	// kube-apiserver may share; authentication, authorization and
	// namespaces are kube-apiserver's.
	Aggregated
	// HistoryOnly serves history.eventapiserver.io alone, behind its own
	// APIService, captured through kube-apiserver's Events API: no Events
	// API, no etcd, no admission. Authentication and authorization are
	// kube-apiserver's, as Aggregated.
	HistoryOnly
)

func (m Mode) String() string {
	switch m {
	case Standalone:
		return "standalone"
	case Aggregated:
		return "aggregated"
	case HistoryOnly:
		return "history-only"
	}
	return "unknown"
}

// ServesEvents reports whether the mode serves the Events API, from etcd.
func (m Mode) ServesEvents() bool { return m != HistoryOnly }

// Delegates reports whether kube-apiserver authenticates and authorizes the
// mode's clients (TokenReview, SubjectAccessReview, front-proxy headers).
func (m Mode) Delegates() bool { return m != Standalone }
