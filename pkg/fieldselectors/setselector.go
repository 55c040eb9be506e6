package fieldselectors

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Set-based field selectors: `reason in (BackOff,Failed)`, `type notin
// (Normal)`.
//
// kube-apiserver parses fieldSelector with fields.ParseSelector while it
// decodes the request's ListOptions (k8s.io/apiserver endpoints/handlers
// listOpts, through the ParameterCodec), and that grammar has only `=`,
// `==` and `!=`. liggitt's objections to set syntax for fields
// (kubernetes/kubernetes #75596, #106836) were escaping (field values may
// hold `,`, `(`, `)` and spaces, which a set cannot delimit) and cost (an
// `in` over unindexed fields is a scan per value). Here:
//   - escaping: a set-based selector is parsed with labels.Parse, so the
//     values of a set are label values (63 characters of [A-Za-z0-9_.-]),
//     exactly as in label selectors; a value that is not one cannot be in a
//     set. Values outside that syntax keep `=`/`!=`.
//   - what is served: a selector is rewritten only when the set grammar
//     serves all of it: labels.Parse reads it, every requirement is `in`,
//     `notin`, `=`, `==` or `!=`, every set is over a label with a set form
//     and every other requirement over a label the resource accepts (the
//     resource's table, fieldselectors.go). Anything else (a set over an
//     unknown label, over history's since and until, an exists or `>`
//     requirement, a malformed set) is left as it came, so kube-apiserver's
//     own parser refuses it with kube-apiserver's own 400, byte for byte:
//     `invalid selector: 'color in (red)'; can't understand 'color in
//     (red)'`.
//   - cost: every `in` over an indexed field is answered from index
//     buckets, one per value, up to maxSetLookups values (IndexedSet). The
//     Events registry indexes the references' uids and names (their OR
//     fields' buckets serve involvedObject.*, related.* and the OR labels)
//     and the reporter (reportingComponent/reportingController):
//     registry/event/storage lists each value's bucket and merges them, a
//     reporter's only for a list across namespaces, where the alternative is
//     a scan of the cache (within a namespace, one scan of the namespace
//     costs less than a lookup per value: WithinNamespace). History answers
//     `in` with one IN (...) on its columns' indexes (uids and names;
//     namespace and time). reason, type and the other fields are indexed by
//     neither, so a set over them costs what `=` over them costs in
//     kube-apiserver: one pass over the list's scope, each Event matched
//     once against the set (when an `=` or `in` on an indexed field sits
//     beside it, that field's buckets are the scope).
//   - `notin` is never answered from an index, and cannot be for less: its
//     answer is every Event of the scope outside the buckets of its values,
//     so the cache must walk the whole scope to produce it whatever it
//     knows; a bucket's keys would only replace matching one string per
//     Event against a few values by a map lookup per Event, no cheaper. It
//     is therefore one pass over the scope, exactly the cost of its
//     equivalent `f!=a,f!=b`, which kube-apiserver accepts; beside an `=` or
//     `in` on an indexed field it filters those buckets.
//   - watches: the watch cache keys watchers by one value of one field (the
//     trigger, involvedObject.name: TriggerFuncs), so a watch with
//     `involvedObject.name in (a,b)` is woken for every Event change and
//     matches each against the set, as any kube-apiserver watch with a
//     selector other than its trigger's `=` is. Splitting it into one watch
//     per value would need the streams merged in resourceVersion order,
//     which separate cacher watchers do not guarantee; delivering out of
//     order would break resuming from a resourceVersion.
//   - kube-apiserver's field selector grammar (k8s.io/apimachinery
//     fields.ParseSelector at v0.36.3: `=`, `==`, `!=` and nothing else)
//     has no set form of its own, so no other spelling is accepted: the
//     internal labels below never reach a client, and a client sending one
//     (`reason:in=x`) gets kube-apiserver's 400 for an unknown label
//     (clientLabelMark).
//
// A request's selector is resolved once, before the handler chain
// (WithSetSelectors), and the handlers' decoding is given its rewrite
// (WithResolvedSelectors): each set requirement becomes a one-term field
// requirement whose label carries the operator (inSuffix, notInSuffix) and
// whose value is the set joined by commas (label values hold none). Label
// conversions keep the suffix; Read turns a converted selector into the
// Requirements that the Events registry, its indexes and history's store
// query all read.
const (
	inSuffix    = ":in"
	notInSuffix = ":notin"
	// clientLabelMark marks a label a client spelled with one of the
	// suffixes (or with the mark itself) in a plain field selector: such a
	// label is no field, and its conversion fails with kube-apiserver's
	// "field label not supported: <label as sent>" (labelAsSent). Marking
	// every such label, the mark included, keeps each client label apart
	// from the internal ones whatever it spells.
	clientLabelMark = ":sent"
)

// resolution is a request's field selector as resolved: the query the
// handlers decode, and the RequestInfo of the request.
type resolution struct {
	query string
	info  *apirequest.RequestInfo
	err   error
}

type resolutionKey struct{}

// WithSetSelectors resolves the field selector of a list or watch of a
// resource with field selectors (tables), once per request, before the
// handler chain: WithRequestInfo's resolver (RequestInfoResolver) and the
// handlers' decoding (WithResolvedSelectors) both take the result from the
// request's context. resolver resolves the resource from the path (the
// chain's own, c.RequestInfoResolver). The request itself stays as sent,
// so the audit log records the selector the client sent.
func WithSetSelectors(chain http.Handler, resolver apirequest.RequestInfoResolver) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r := resolve(req, resolver); r != nil {
			req = req.WithContext(context.WithValue(req.Context(), resolutionKey{}, r))
		}
		chain.ServeHTTP(w, req)
	})
}

// WithResolvedSelectors gives the handlers the field selector as resolved
// by WithSetSelectors; any other request passes unchanged.
func WithResolvedSelectors(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r, ok := req.Context().Value(resolutionKey{}).(*resolution); ok {
			req = withQuery(req, r.query)
		}
		handler.ServeHTTP(w, req)
	})
}

// RequestInfoResolver resolves the RequestInfo of a request whose selector
// WithSetSelectors rewrote from the rewrite, and any other with resolver.
// kube's resolver decodes the list options with kube-apiserver's field
// selector grammar: on the set form as sent it logs "Couldn't parse
// request" at error level for a valid request, and drops a metadata.name
// requirement beside the set, which authorization reads (a list or watch of
// one name is authorized by RBAC resourceNames, as on kube-apiserver). The
// field selector that authorizers are shown stays the one sent: the
// internal labels never leave the server.
func RequestInfoResolver(resolver apirequest.RequestInfoResolver) apirequest.RequestInfoResolver {
	return setSelectorRequestInfo{resolver}
}

type setSelectorRequestInfo struct {
	apirequest.RequestInfoResolver
}

func (r setSelectorRequestInfo) NewRequestInfo(req *http.Request) (*apirequest.RequestInfo, error) {
	if resolved, ok := req.Context().Value(resolutionKey{}).(*resolution); ok {
		return resolved.info, resolved.err
	}
	return r.RequestInfoResolver.NewRequestInfo(req)
}

// resolve resolves a request's field selector; nil when the handlers are to
// decode it as sent.
func resolve(req *http.Request, resolver apirequest.RequestInfoResolver) *resolution {
	if !strings.Contains(req.URL.RawQuery, "fieldSelector") {
		return nil
	}
	query := req.URL.Query()
	values := query["fieldSelector"]
	// A selector without a set or a colon is kube-apiserver's grammar
	// alone: nothing to resolve, at no cost.
	if len(values) != 1 || !strings.ContainsAny(values[0], "(:") {
		return nil
	}
	sent := values[0]
	// The resource, from the path: without the selector, which kube's
	// resolver would log as unparseable.
	query.Del("fieldSelector")
	info, err := resolver.NewRequestInfo(withQuery(req, query.Encode()))
	if err != nil || !info.IsResourceRequest || info.Subresource != "" || info.Name != "" {
		return nil
	}
	t := tableFor(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
	if t == nil {
		return nil
	}
	rewritten, ok := t.rewrite(sent)
	if !ok {
		return nil
	}
	query.Set("fieldSelector", rewritten)
	r := &resolution{query: query.Encode()}
	r.info, r.err = resolver.NewRequestInfo(withQuery(req, r.query))
	if r.info != nil && r.info.FieldSelector != "" {
		r.info.FieldSelector = sent
	}
	return r
}

// ParseSelector parses a field selector that a request's body carries (an
// EventRecordCount's spec.fieldSelector) as a list of resource reads its
// query's (WithSetSelectors): set requirements encoded, a client's spelling
// of the encoding marked, ready for the label conversion and Read.
func ParseSelector(resource schema.GroupVersionResource, selector string) (fields.Selector, error) {
	if t := tableFor(resource); t != nil && strings.ContainsAny(selector, "(:") {
		if rewritten, ok := t.rewrite(selector); ok {
			selector = rewritten
		}
	}
	return fields.ParseSelector(selector)
}

// withQuery is a shallow copy of req with another query.
func withQuery(req *http.Request, query string) *http.Request {
	u := *req.URL
	u.RawQuery = query
	copied := req.WithContext(req.Context())
	copied.URL = &u
	return copied
}

// rewrite is a selector in the field selector grammar with its sets
// encoded and a client's spelling of the encoding marked; ok is false when
// the handlers are to read it as sent.
func (t *table) rewrite(selector string) (string, bool) {
	if strings.Contains(selector, "(") {
		if rewritten, ok := t.rewriteSets(selector); ok {
			return rewritten, true
		}
	}
	if strings.Contains(selector, ":") {
		return markClientLabels(selector)
	}
	return "", false
}

// rewriteSets encodes a selector with set requirements in the field
// selector grammar; ok is false when it has none or when the set grammar
// does not serve all of it (see the top of this file).
func (t *table) rewriteSets(selector string) (string, bool) {
	parsed, err := labels.Parse(selector)
	if err != nil {
		return "", false
	}
	requirements, _ := parsed.Requirements()
	terms := make([]string, 0, len(requirements))
	sets := 0
	for _, r := range requirements {
		values := r.ValuesUnsorted()
		switch r.Operator() {
		case selection.In, selection.NotIn:
			if !t.setForm(r.Key()) {
				return "", false
			}
			sets++
			terms = append(terms, encode(Requirement{Field: r.Key(), Values: values, Not: r.Operator() == selection.NotIn, Set: true}).String())
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
			if !t.plainForm(r.Key()) {
				return "", false
			}
			terms = append(terms, encode(Requirement{Field: r.Key(), Values: values, Not: r.Operator() == selection.NotEquals}).String())
		default:
			return "", false
		}
	}
	if sets == 0 {
		return "", false
	}
	return strings.Join(terms, ","), true
}

// markClientLabels marks the labels of a plain field selector that end
// with a set suffix or the mark; ok is false when there are none, or when
// the selector does not parse (the handler then refuses it as it comes).
func markClientLabels(selector string) (string, bool) {
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return "", false
	}
	marked := false
	terms := []fields.Selector{}
	for _, r := range parsed.Requirements() {
		label := r.Field
		for _, suffix := range []string{inSuffix, notInSuffix, clientLabelMark} {
			if strings.HasSuffix(label, suffix) {
				label += clientLabelMark
				marked = true
				break
			}
		}
		terms = append(terms, term(label, r.Value, r.Operator == selection.NotEquals))
	}
	if !marked {
		return "", false
	}
	return fields.AndSelectors(terms...).String(), true
}

// labelAsSent is the label a conversion error names: as the client spelled
// it, without the set suffix of a set-based requirement.
func labelAsSent(label string) string {
	if sent, ok := strings.CutSuffix(label, clientLabelMark); ok {
		return sent
	}
	base, _ := splitSetLabel(label)
	return base
}

// splitSetLabel splits a label into the field label and its set suffix
// ("" for a plain requirement, and for a client's marked label).
func splitSetLabel(label string) (string, string) {
	if strings.HasSuffix(label, clientLabelMark) {
		return label, ""
	}
	for _, suffix := range []string{inSuffix, notInSuffix} {
		if base, ok := strings.CutSuffix(label, suffix); ok {
			return base, suffix
		}
	}
	return label, ""
}

// Requirement is one requirement of a selector in internal labels, as the
// stores read it: the field, the values any of which it must equal (one
// for `=` and `!=`), negated for `!=` and notin.
type Requirement struct {
	Field  string
	Values []string
	Not    bool
	// Set is true for in and notin.
	Set bool
}

// Read reads a converted selector (internal labels, sets encoded) into its
// requirements.
func Read(s fields.Selector) []Requirement {
	if s == nil {
		return nil
	}
	raw := s.Requirements()
	out := make([]Requirement, 0, len(raw))
	for _, r := range raw {
		out = append(out, read(r))
	}
	return out
}

func read(r fields.Requirement) Requirement {
	base, suffix := splitSetLabel(r.Field)
	if suffix != "" {
		return Requirement{Field: base, Values: strings.Split(r.Value, ","), Not: suffix == notInSuffix, Set: true}
	}
	return Requirement{Field: r.Field, Values: []string{r.Value}, Not: r.Operator == selection.NotEquals}
}

// Selector is requirements as a selector the stores and Matcher read: the
// inverse of Read.
func Selector(requirements []Requirement) fields.Selector {
	terms := make([]fields.Selector, 0, len(requirements))
	for _, r := range requirements {
		terms = append(terms, encode(r))
	}
	return fields.AndSelectors(terms...)
}

func encode(r Requirement) fields.Selector {
	switch {
	case r.Set && r.Not:
		return term(r.Field+notInSuffix, strings.Join(r.Values, ","), false)
	case r.Set:
		return term(r.Field+inSuffix, strings.Join(r.Values, ","), false)
	}
	return term(r.Field, r.Values[0], r.Not)
}

func term(label, value string, not bool) fields.Selector {
	if not {
		return fields.OneTermNotEqualSelector(label, value)
	}
	return fields.OneTermEqualSelector(label, value)
}

// maxSetLookups bounds the index lookups one set costs; a larger set is
// matched in one pass over the scope, as a set over an unindexed field.
const maxSetLookups = 16

// IndexedSet picks the requirement of a converted selector that a list
// answers with one index lookup per value: the first `in` over a field the
// watch cache indexes, with at most maxSetLookups values. A per-object or
// per-name index serves every list, a reporter's only a list across
// namespaces (namespaced false), as WithinNamespace keeps it off a
// namespace's list. rest is every other requirement; ok is false when no
// set qualifies.
func IndexedSet(s fields.Selector, namespaced bool) (set Requirement, rest []Requirement, ok bool) {
	for _, r := range Read(s) {
		if !ok && r.Set && !r.Not && len(r.Values) <= maxSetLookups && setIndexed(r.Field, namespaced) {
			set, ok = r, true
			continue
		}
		rest = append(rest, r)
	}
	return set, rest, ok
}

func setIndexed(label string, namespaced bool) bool {
	for _, index := range Matcher(labels.Everything(), fields.OneTermEqualSelector(label, "x")).IndexFields {
		if f, ok := byLabel[index]; ok && (f.index == perObject || f.index == perName || (f.index == perReporter && !namespaced)) {
			return true
		}
	}
	return false
}
