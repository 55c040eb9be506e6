package storm

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	endpointsmetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// earlyMaxBody bounds the bodies the early refusal reads: an Event bigger
// than this goes the whole way, so that an oversize one gets its 413 (or
// its 422) as before, whatever its writer's budget. The stored size is
// the decoded Event's plus what the server adds (uid, timestamps,
// managedFields: at most about the size of the Event's field names
// again), so a quarter of the limit leaves room for both.
func (p *Plugin) earlyMaxBody() int64 {
	if p.maxEventBytes <= 0 {
		return DefaultMaxEventBytes / 4
	}
	return p.maxEventBytes / 4
}

// WithEarlyRefusal answers a create of an Event whose writer is over its
// budget before the API handler starts on it. In the handler, the
// structured-merge-diff pass of managedFields, the request's audit and the
// admission chain's wrappers all run before the first admission plugin;
// during a storm most writes are refused, and that work was the bulk of a
// refusal's cost.
//
// It looks only at the writes of users with a write refused in the last
// hotFor (limiter.hot, a map lookup), so a healthy cluster's creates are
// not decoded twice. For those it decodes the body as the handler does
// (same codecs, strict, into the internal Event) and asks the limiter,
// without spending, whether the user's or the reporter's budget refuses
// (limiter.peek); if so it writes the 429 the admission plugin would have
// written (same message, Retry-After, metrics), else the request goes on
// with its body untouched. Anything the handler would answer otherwise
// first (query parameters such as dryRun or fieldValidation, a body that
// does not decode cleanly, a namespace or apiVersion that does not match,
// ownerReferences, which get warnings, a body that may be oversize) goes
// on to the handler, which decides as it always has.
//
// The handler's instrumentation never sees an early refusal, so it counts
// the request itself in apiserver_request_total (and the latency and size
// metrics that go with it), as the handler counts a refusal in admission:
// the count of Event requests is the count clients sent, which is what a
// front door's operator compares.
func (p *Plugin) WithEarlyRefusal(h http.Handler, codecs runtime.NegotiatedSerializer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		if gv, err := p.refuseEarly(req, codecs); err != nil {
			counted := &countingWriter{ResponseWriter: w}
			responsewriters.ErrorNegotiated(err, codecs, gv, counted, req)
			info, _ := request.RequestInfoFrom(req.Context())
			endpointsmetrics.MonitorRequest(req, req.Method, info.APIGroup, info.APIVersion, info.Resource, info.Subresource,
				endpointsmetrics.CleanScope(info), endpointsmetrics.APIServerComponent, false, "",
				http.StatusTooManyRequests, counted.n, time.Since(start))
			return
		}
		h.ServeHTTP(w, req)
	})
}

// countingWriter counts the bytes of a response, for its size metric.
type countingWriter struct {
	http.ResponseWriter
	n int
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += n
	return n, err
}

// refuseEarly returns the group version to answer in and the 429 for req,
// or no error when the handler is to decide. It restores the body it reads.
func (p *Plugin) refuseEarly(req *http.Request, codecs runtime.NegotiatedSerializer) (schema.GroupVersion, error) {
	if req.Method != http.MethodPost {
		return schema.GroupVersion{}, nil
	}
	ctx := req.Context()
	info, ok := request.RequestInfoFrom(ctx)
	if !ok || !info.IsResourceRequest || info.Verb != "create" || info.Resource != "events" || info.Subresource != "" ||
		info.Name != "" || info.Namespace == "" || info.APIVersion != "v1" ||
		!eventResources[schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}] {
		return schema.GroupVersion{}, nil
	}
	who, _ := request.UserFrom(ctx)
	userName := ""
	if who != nil {
		userName = who.GetName()
	}
	// The query is parsed only for a hot user's writes: parsing it for
	// every create cost about 1% of the server's CPU per create.
	if !p.limiter.hot(userName) || !harmlessQuery(req) {
		return schema.GroupVersion{}, nil
	}
	if req.ContentLength <= 0 || req.ContentLength > p.earlyMaxBody() || req.Body == nil {
		return schema.GroupVersion{}, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength+1))
	// The handler reads the body again from here; closing closes the
	// original.
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
	if err != nil || int64(len(body)) != req.ContentLength {
		return schema.GroupVersion{}, nil
	}
	gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	event, ok := decodeEvent(req, body, gv, codecs)
	if !ok || (event.Namespace != "" && event.Namespace != info.Namespace) || len(event.OwnerReferences) > 0 {
		return schema.GroupVersion{}, nil
	}
	r := reporterOf(event, who)
	v := p.limiter.peek(r.userKey, r.key, opCreate)
	if v.allowed {
		return schema.GroupVersion{}, nil
	}
	earlyRefusedTotal.Inc()
	return gv, p.answer(v, r, opCreate, who)
}

// harmlessQueries are the query parameters that change nothing the
// create handler answers before admission: timeout (client-go sends it
// whenever its client has a timeout; the request deadline filter has
// already checked it) and pretty (which ErrorNegotiated honours as the
// handler would). Any other (dryRun, fieldManager, fieldValidation...) may
// change the answer, and sends the request on to the handler.
var harmlessQueries = map[string]bool{"timeout": true, "pretty": true}

func harmlessQuery(req *http.Request) bool {
	if req.URL.RawQuery == "" {
		return true
	}
	for k := range req.URL.Query() {
		if !harmlessQueries[k] {
			return false
		}
	}
	return true
}

// decodeEvent decodes body as the create handler does
// (handlers.createHandler): the request's serializer, strict, to the
// group's internal version. ok is false for anything the handler would
// refuse or warn about.
func decodeEvent(req *http.Request, body []byte, gv schema.GroupVersion, codecs runtime.NegotiatedSerializer) (*core.Event, bool) {
	s, err := negotiation.NegotiateInputSerializer(req, false, codecs)
	if err != nil || s.StrictSerializer == nil {
		return nil, false
	}
	if _, _, err := negotiation.NegotiateOutputMediaType(req, codecs, negotiation.DefaultEndpointRestrictions); err != nil {
		return nil, false
	}
	decoder := codecs.DecoderToVersion(s.StrictSerializer, schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal})
	defaultGVK := gv.WithKind("Event")
	obj, gvk, err := decoder.Decode(body, &defaultGVK, &core.Event{})
	if err != nil || gvk == nil || gvk.GroupVersion() != gv {
		return nil, false
	}
	event, ok := obj.(*core.Event)
	return event, ok
}
