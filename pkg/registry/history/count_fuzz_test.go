package history_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// FuzzCountSpec: whatever a client puts in a count's spec, the answer is a
// count or a 4xx Status (422 at the field, 400), never a 500 or a panic:
// the field selector goes through kube's parser, the label conversion and
// the window's, the rest through the spec's checks, before the store.
func FuzzCountSpec(f *testing.F) {
	s, err := sqlite.Open(filepath.Join(f.TempDir(), "history.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	rest := registry.NewCountREST(s, nil, authorizerfactory.NewAlwaysAllowAuthorizer(), apiserver.Scheme, false, registry.CountConfig{})
	ctx := genericapirequest.WithUser(genericapirequest.WithNamespace(context.Background(), "ns"), &user.DefaultInfo{Name: "fuzz"})
	f.Add("type=Warning,since=168h", "reason", int64(time.Hour), int32(10))
	f.Add("regardingOrRelated.uid=u,until=2026-11-01T00:00:00Z", "metadata.namespace,reason", int64(24*time.Hour), int32(0))
	f.Add("reason in (a,b)", "type,type", int64(-1), int32(-3))
	f.Add("since=,until=1h", "", int64(0), int32(1000))
	f.Add("note=x,action!=y,regarding.kind==Pod", "regarding.name", int64(time.Second), int32(1))
	f.Fuzz(func(t *testing.T, selector, groupBy string, bucket int64, top int32) {
		spec := historyapi.EventRecordCountSpec{FieldSelector: selector, BucketSize: metav1.Duration{Duration: time.Duration(bucket)}, Top: top}
		if groupBy != "" {
			spec.GroupBy = strings.Split(groupBy, ",")
		}
		_, err := rest.Create(ctx, &historyapi.EventRecordCount{Spec: spec}, nil, &metav1.CreateOptions{})
		if err == nil {
			return
		}
		status, ok := err.(apierrors.APIStatus)
		if !ok {
			t.Fatalf("%+v: not a Status: %v", spec, err)
		}
		if code := status.Status().Code; code != http.StatusUnprocessableEntity && code != http.StatusBadRequest {
			t.Fatalf("%+v: %d %v", spec, code, err)
		}
	})
}
