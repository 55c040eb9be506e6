package storm

import (
	"context"
	"net/http"
	"sync"
)

type memoKey struct{}

// chargeMemo is the limiter's decision for one request.
type chargeMemo struct {
	mu      sync.Mutex
	decided bool
	err     error
}

// WithChargeMemo gives each update a place for the limiter's decision.
// An update that conflicts is retried inside the registry
// (GuaranteedUpdate), admission included, with the request's context: the
// memo makes the retry reuse the first decision instead of spending more
// tokens. The server installs it around its API handler
// (BuildHandlerChainFunc). Only writes by PUT and PATCH are retried that
// way: a POST runs mutating admission, which charges, once (the generic
// Store's retries of a generated name re-run only validating admission),
// so it goes without a memo rather than pay a copy of its request.
func WithChargeMemo(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut && r.Method != http.MethodPatch {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), memoKey{}, &chargeMemo{})))
	})
}
