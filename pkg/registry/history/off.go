package history

import (
	"context"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
)

// OffMessage is what every eventrecords request is told while history is
// off: how to turn it on, and why an install of several replicas ships it
// off (docs/aggregated.md).
const OffMessage = "Event history is off on this server (--history=false). A single server keeps it with --history " +
	"(SQLite under --data-dir); replicas behind one APIService must share one PostgreSQL database, or each would " +
	"answer differently and lose its history on every rollout: --history --history-store=postgres " +
	"--history-dsn-file=FILE (kustomize: components/history-postgres; helm: history.store=postgres). " +
	"See docs/aggregated.md, \"History\"."

// Off serves eventrecords while history is off. The group stays in
// discovery with its verbs, so that an APIService an install keeps for it
// is Available (an Unavailable one fails discovery for every client and
// holds up namespace deletion), and each request gets a 404 saying how to
// turn history on: not a 5xx, which clients would retry and error budgets
// would count, for a state no retry changes.
type Off struct{ tableConvertor }

var (
	_ rest.Getter               = Off{}
	_ rest.Lister               = Off{}
	_ rest.Scoper               = Off{}
	_ rest.SingularNameProvider = Off{}
	_ rest.Watcher              = Off{}
)

func (Off) New() runtime.Object     { return &historyapi.EventRecord{} }
func (Off) NewList() runtime.Object { return &historyapi.EventRecordList{} }
func (Off) Destroy()                {}
func (Off) NamespaceScoped() bool   { return true }
func (Off) GetSingularName() string { return "eventrecord" }

func (Off) Get(context.Context, string, *metav1.GetOptions) (runtime.Object, error) {
	return nil, errHistoryOff()
}

func (Off) List(context.Context, *metainternalversion.ListOptions) (runtime.Object, error) {
	return nil, errHistoryOff()
}

func (Off) Watch(context.Context, *metainternalversion.ListOptions) (watch.Interface, error) {
	return nil, errHistoryOff()
}

func errHistoryOff() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: OffMessage,
		Details: &metav1.StatusDetails{Group: historyapi.GroupName, Kind: "eventrecords"},
	}}
}
