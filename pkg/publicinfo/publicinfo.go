// Package publicinfo lets anonymous callers read the health endpoints and
// /version, as kube-apiserver does through its bootstrap ClusterRole
// system:public-info-viewer (get on /healthz, /livez, /readyz, /version,
// /version/, bound to system:authenticated and system:unauthenticated), so
// kubelet httpGet probes and scrapers need no credentials.
//
// Exactly that role's paths: a single check (/readyz/etcd) stays private, as
// it is on kube-apiserver, while /readyz?verbose and /livez?exclude=etcd are
// the same paths with a query. Anonymous callers stay unauthenticated
// everywhere else (401), as
// kube-apiserver's AnonymousAuthConfigurableEndpoints limit them to a path
// list; only the aggregated server, whose authentication kube-apiserver
// delegates, answers them 403 there as kube-apiserver does.
package publicinfo

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Paths in the syntax of DelegatingAuthorizationOptions.AlwaysAllowPaths:
// exact, or a prefix ending in *.
var Paths = []string{
	"/healthz", "/livez", "/readyz", "/version", "/version/",
}

// IsPublic reports whether p is one of Paths.
func IsPublic(p string) bool {
	for _, allowed := range Paths {
		if prefix, ok := strings.CutSuffix(allowed, "*"); ok {
			if strings.HasPrefix(p, prefix) {
				return true
			}
		} else if p == allowed {
			return true
		}
	}
	return false
}

// NewAnonymousAuthenticator authenticates requests for the public paths as
// system:anonymous in system:unauthenticated, and no other request.
func NewAnonymousAuthenticator() authenticator.Request {
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		if !IsPublic(req.URL.Path) {
			return nil, false, nil
		}
		auds, _ := authenticator.AudiencesFrom(req.Context())
		return &authenticator.Response{
			User:      &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}},
			Audiences: auds,
		}, true, nil
	})
}

// NewAuthorizer allows get on the public paths to everyone, the rule of
// system:public-info-viewer, and has no opinion on anything else.
func NewAuthorizer() authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.IsResourceRequest() || a.GetVerb() != "get" || !IsPublic(a.GetPath()) {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, "system:public-info-viewer", nil
	})
}
