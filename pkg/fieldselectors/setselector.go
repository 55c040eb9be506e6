package fieldselectors

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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
//   - cost: history answers `in` with one IN (...) on the store's column
//     index; the Events registry answers an `in` over a per-object or
//     per-name indexed field with one index lookup per value
//     (registry/event/storage listSetByIndex). Otherwise a set requirement
//     pins no bucket (eventSelector.RequiresExactMatch) and the watch cache
//     matches it per Event of the scanned scope.
//
// The rewrite happens before the handler decodes the options: each set
// requirement becomes a one-term field requirement whose label carries the
// operator (inSuffix, notInSuffix) and whose value is the set joined by
// commas (label values hold none). Label conversions keep the suffix;
// eventSelector and history's store query read it back.
const (
	inSuffix    = ":in"
	notInSuffix = ":notin"
)

// WithSetSelectors rewrites set-based fieldSelectors for the handlers that
// follow; any other request passes unchanged.
func WithSetSelectors(handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.RawQuery, "fieldSelector") {
			query := req.URL.Query()
			if values := query["fieldSelector"]; len(values) == 1 {
				if rewritten, ok := RewriteSetSelector(values[0]); ok {
					query.Set("fieldSelector", rewritten)
					req.URL.RawQuery = query.Encode()
				}
			}
		}
		handler.ServeHTTP(w, req)
	})
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

// splitSetLabel splits a label into the field label and its set suffix
// ("" for a plain requirement).
func splitSetLabel(label string) (string, string) {
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

// PerObjectIndexed reports whether an `=` on the internal label is answered
// from a per-object or per-name index bucket (not a reporter's, which can
// be larger than a namespace): what a set over it can be answered from, one
// bucket per value.
func PerObjectIndexed(label string) bool {
	for _, index := range Matcher(labels.Everything(), fields.OneTermEqualSelector(label, "x")).IndexFields {
		if f, ok := byLabel[index]; ok && (f.index == perObject || f.index == perName) {
			return true
		}
	}
	return false
}
