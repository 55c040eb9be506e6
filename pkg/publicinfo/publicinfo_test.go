package publicinfo

import (
	"context"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestPublicPaths(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		public bool
	}{
		{name: "healthz", path: "/healthz", public: true},
		{name: "livez", path: "/livez", public: true},
		{name: "readyz", path: "/readyz", public: true},
		{name: "one readyz check", path: "/readyz/etcd", public: false},
		{name: "one livez check", path: "/livez/ping", public: false},
		{name: "one healthz check", path: "/healthz/poststarthook/event-etcd-health-probe", public: false},
		{name: "version", path: "/version", public: true},
		{name: "version slash", path: "/version/", public: true},
		{name: "below version", path: "/version/x", public: false},
		{name: "prefix is not a path", path: "/readyzz", public: false},
		{name: "metrics", path: "/metrics", public: false},
		{name: "events", path: "/api/v1/events", public: false},
		{name: "discovery", path: "/apis", public: false},
		{name: "root", path: "/", public: false},
		{name: "openapi", path: "/openapi/v2", public: false},
	}
	authn := NewAnonymousAuthenticator()
	authz := NewAuthorizer()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, ok, err := authn.AuthenticateRequest(httptest.NewRequest("GET", tc.path, nil))
			if err != nil || ok != tc.public {
				t.Fatalf("authenticated %v (err %v), want %v", ok, err, tc.public)
			}
			if ok && (resp.User.GetName() != user.Anonymous || len(resp.User.GetGroups()) != 1 || resp.User.GetGroups()[0] != user.AllUnauthenticated) {
				t.Errorf("user %+v, want system:anonymous in system:unauthenticated", resp.User)
			}
			for _, verb := range []string{"get", "post", "delete"} {
				attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: user.Anonymous}, Verb: verb, Path: tc.path}
				decision, _, err := authz.Authorize(context.Background(), attrs)
				want := authorizer.DecisionNoOpinion
				if tc.public && verb == "get" {
					want = authorizer.DecisionAllow
				}
				if err != nil || decision != want {
					t.Errorf("%s: decision %v (err %v), want %v", verb, decision, err, want)
				}
			}
		})
	}
	// Resource requests never match, whatever their path.
	attrs := authorizer.AttributesRecord{Verb: "get", Path: "/readyz", ResourceRequest: true, Resource: "events"}
	if d, _, _ := authz.Authorize(context.Background(), attrs); d != authorizer.DecisionNoOpinion {
		t.Errorf("resource request: %v, want no opinion", d)
	}
}
