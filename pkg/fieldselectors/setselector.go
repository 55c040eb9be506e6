package fieldselectors

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
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
//     set, and a selector that labels.Parse refuses is left as it came, so
//     kube-apiserver's own parser refuses it with kube-apiserver's own 400,
//     byte for byte. Values outside that syntax keep `=`/`!=`.
//   - cost: every `in` over an indexed field is answered from index
//     buckets, one per value. The Events registry indexes the references'
//     uids and names (their OR fields' buckets serve involvedObject.*,
//     related.* and the OR labels) and the reporter
//     (reportingComponent/reportingController): registry/event/storage
//     listSetByIndex lists each value's bucket and merges them, a reporter's
//     only for a list across namespaces, where the alternative is a scan of
//     the cache (within a namespace, one scan of the namespace costs less
//     than a lookup per value: fieldselectors.WithinNamespace). History
//     answers `in` with one IN (...) on its columns' indexes (uids and
//     names; namespace and time). reason, type and the other fields are
//     indexed by neither, so a set over them costs what `=` over them costs
//     in kube-apiserver: one pass over the list's scope, each Event matched
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
// The rewrite happens before the handler decodes the options: each set
// requirement becomes a one-term field requirement whose label carries the
// operator (inSuffix, notInSuffix) and whose value is the set joined by
// commas (label values hold none). Label conversions keep the suffix;
// eventSelector and history's store query read it back.
const (
	inSuffix    = ":in"
	notInSuffix = ":notin"
	// clientLabelMark marks a label a client spelled with one of the
	// suffixes (or with the mark itself) in a plain field selector: such a
	// label is no field, and its conversion fails with kube-apiserver's
	// "field label not supported: <label as sent>" (LabelAsSent). Marking
	// every such label, the mark included, keeps each client label apart
	// from the internal ones whatever it spells.
	clientLabelMark = ":sent"
)

// WithSetSelectors rewrites set-based fieldSelectors for the handlers that
// follow; any other request passes unchanged.
func WithSetSelectors(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if query, ok := rewriteQuery(req.URL); ok {
			req.URL.RawQuery = query
		}
		handler.ServeHTTP(w, req)
	})
}

// RequestInfoResolver resolves a request's RequestInfo from the query that
// WithSetSelectors gives the handlers. The resolver runs first in the
// chain and decodes the list options with kube-apiserver's field selector
// grammar: on the set form as sent it logs "Couldn't parse request" at
// error level for a valid request, and drops a metadata.name requirement
// beside the set, which authorization reads (a list or watch of one name
// is authorized by RBAC resourceNames, as on kube-apiserver). The field
// selector that authorizers are shown stays the one sent: the internal
// labels never leave the server.
func RequestInfoResolver(resolver apirequest.RequestInfoResolver) apirequest.RequestInfoResolver {
	return setSelectorRequestInfo{resolver}
}

type setSelectorRequestInfo struct {
	apirequest.RequestInfoResolver
}

func (r setSelectorRequestInfo) NewRequestInfo(req *http.Request) (*apirequest.RequestInfo, error) {
	query, ok := rewriteQuery(req.URL)
	if !ok {
		return r.RequestInfoResolver.NewRequestInfo(req)
	}
	// A copy: the audit and the handlers see the request as sent until
	// WithSetSelectors, inside the chain, rewrites it.
	rewritten := *req.URL
	rewritten.RawQuery = query
	copied := req.WithContext(req.Context())
	copied.URL = &rewritten
	info, err := r.RequestInfoResolver.NewRequestInfo(copied)
	if info != nil && info.FieldSelector != "" {
		info.FieldSelector = req.URL.Query().Get("fieldSelector")
	}
	return info, err
}

// rewriteQuery is the query with its fieldSelector rewritten; ok is false
// when it needs no rewrite.
func rewriteQuery(u *url.URL) (string, bool) {
	if !strings.Contains(u.RawQuery, "fieldSelector") {
		return "", false
	}
	query := u.Query()
	values := query["fieldSelector"]
	if len(values) != 1 {
		return "", false
	}
	rewritten, ok := RewriteSetSelector(values[0])
	if !ok {
		rewritten, ok = markClientLabels(values[0])
	}
	if !ok {
		return "", false
	}
	query.Set("fieldSelector", rewritten)
	return query.Encode(), true
}

// RewriteSetSelector encodes a selector with set requirements in the field
// selector grammar; ok is false when it has none or is not a valid
// label-syntax selector with only =, ==, !=, in and notin.
func RewriteSetSelector(selector string) (string, bool) {
	if !strings.Contains(selector, "(") {
		return selector, false
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		return selector, false
	}
	requirements, _ := parsed.Requirements()
	terms := make([]string, 0, len(requirements))
	sets := 0
	for _, r := range requirements {
		values := r.ValuesUnsorted()
		switch r.Operator() {
		case selection.In:
			sets++
			terms = append(terms, r.Key()+inSuffix+"="+fields.EscapeValue(strings.Join(values, ",")))
		case selection.NotIn:
			sets++
			terms = append(terms, r.Key()+notInSuffix+"="+fields.EscapeValue(strings.Join(values, ",")))
		case selection.Equals, selection.DoubleEquals:
			terms = append(terms, r.Key()+"="+fields.EscapeValue(values[0]))
		case selection.NotEquals:
			terms = append(terms, r.Key()+"!="+fields.EscapeValue(values[0]))
		default:
			return selector, false
		}
	}
	if sets == 0 {
		return selector, false
	}
	return strings.Join(terms, ","), true
}

// markClientLabels marks the labels of a plain field selector that end
// with a set suffix or the mark; ok is false when there are none, or when
// the selector does not parse (the handler then refuses it as it comes).
func markClientLabels(selector string) (string, bool) {
	if !strings.Contains(selector, ":") {
		return selector, false
	}
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return selector, false
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
		if r.Operator == selection.NotEquals {
			terms = append(terms, fields.OneTermNotEqualSelector(label, r.Value))
		} else {
			terms = append(terms, fields.OneTermEqualSelector(label, r.Value))
		}
	}
	if !marked {
		return selector, false
	}
	return fields.AndSelectors(terms...).String(), true
}

// LabelAsSent is the label a conversion error names: as the client spelled
// it, without the set suffix of a set-based requirement.
func LabelAsSent(label string) string {
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

// SetRequirement is a requirement as the store reads it: the field, the
// values any of which it must equal, negated for `!=` and notin.
type SetRequirement struct {
	Field  string
	Values []string
	Not    bool
}

// ReadRequirement reads a field requirement, set-based or not, in internal
// labels.
func ReadRequirement(r fields.Requirement) SetRequirement {
	base, suffix := splitSetLabel(r.Field)
	switch suffix {
	case inSuffix:
		return SetRequirement{Field: base, Values: strings.Split(r.Value, ",")}
	case notInSuffix:
		return SetRequirement{Field: base, Values: strings.Split(r.Value, ","), Not: true}
	}
	return SetRequirement{Field: r.Field, Values: []string{r.Value}, Not: r.Operator == selection.NotEquals}
}

// SetIndexed reports whether an `in` over the internal label is answered
// from the watch cache's index buckets, one per value: a per-object or
// per-name index always, a reporter's only for a list across namespaces
// (namespaced false), as WithinNamespace keeps it off a namespace's list.
func SetIndexed(label string, namespaced bool) bool {
	for _, index := range Matcher(labels.Everything(), fields.OneTermEqualSelector(label, "x")).IndexFields {
		if f, ok := byLabel[index]; ok && (f.index == perObject || f.index == perName || (f.index == perReporter && !namespaced)) {
			return true
		}
	}
	return false
}
