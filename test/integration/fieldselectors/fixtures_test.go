package fieldselectors

// The fixed set of Events the field-selector tests select from, the label
// vocabulary of each served version, and the table of LIST cases with the
// exact Events each must return. The same Events are loaded into our server
// and, for the compatibility test, into kube-apiserver v1.36.3.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// Namespaces of the fixture Events. Node Events live in "default", where
// core/v1 puts Events about cluster-scoped objects.
const (
	fsNSOne     = "fs-one"
	fsNSTwo     = "fs-two"
	fsNSDefault = metav1.NamespaceDefault
)

// fsFixture is one fixture Event and the API it is created through.
type fsFixture struct {
	core   *corev1.Event   // created through core/v1
	events *eventsv1.Event // created through events.k8s.io/v1
}

func (f fsFixture) key() string {
	if f.core != nil {
		return f.core.Namespace + "/" + f.core.Name
	}
	return f.events.Namespace + "/" + f.events.Name
}

// The fixture Events. Every selectable field takes at least two values
// (one of them often empty) across the set:
//
//	name               ns       involvedObject/regarding             related                          reason            type    reportingController   source              action   reportingInstance
//	pod-a-started      fs-one   Pod fs-one/pod-a uid-pod-a rv100 fp  -                                Started           Normal  kubelet               kubelet             -        node-1
//	pod-a-backoff      fs-one   Pod fs-one/pod-a uid-pod-a rv101 fp  -                                BackOff           Warning kubelet               kubelet             -        node-1
//	pod-a-scheduled    fs-one   Pod fs-one/pod-a uid-pod-a rv99      Node node-1 uid-node-1           Scheduled         Normal  default-scheduler     (default-scheduler) Binding  default-scheduler-host-1   (events.k8s.io/v1)
//	rs-web-created     fs-one   ReplicaSet fs-one/web uid-rs-web     Pod fs-one/pod-a uid-pod-a fp    SuccessfulCreate  Normal  replicaset-controller replicaset-controller Create -
//	pod-a-killing      fs-two   Pod fs-two/pod-a uid-pod-a-two fp    -                                Killing           Normal  kubelet               kubelet             -        node-2
//	node-1-not-ready   default  Node node-1 uid-node-1 (no ns, rv)   -                                NodeNotReady      Warning -                     node-controller     -        -
//	deploy-web-scaled  fs-two   Deployment fs-two/web uid-deploy-web ReplicaSet fs-two/web-5d4f       ScalingReplicaSet Normal  deployment-controller deployment-controller Scale  deployment-controller-0
//	pod-c-failed       fs-two   Pod fs-two/pod-c uid-pod-c fp2       Node node-2 uid-node-2           Failed            Warning kubelet               (kubelet)           Pulling  node-2                     (events.k8s.io/v1)
//
// (fp = spec.containers{app}, fp2 = spec.initContainers{init}; a source in
// parentheses is the reportingController fallback of Events without one.)
func fsFixtures() []fsFixture {
	now := time.Now()
	stamp := metav1.NewTime(now.Add(-time.Minute).Truncate(time.Second))
	eventTime := metav1.NewMicroTime(now.Add(-time.Minute).Truncate(time.Microsecond))
	pod := func(ns, name, uid, rv, fieldPath string) corev1.ObjectReference {
		return corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name, UID: types.UID(uid), APIVersion: "v1", ResourceVersion: rv, FieldPath: fieldPath}
	}
	legacy := func(ns, name string, involved corev1.ObjectReference, reason, typ, source, reportingController, instance string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
			InvolvedObject:      involved,
			Reason:              reason,
			Message:             "msg:" + name,
			Source:              corev1.EventSource{Component: source},
			FirstTimestamp:      stamp,
			LastTimestamp:       stamp,
			Count:               1,
			Type:                typ,
			ReportingController: reportingController,
			ReportingInstance:   instance,
		}
	}
	modern := func(ns, name string, regarding corev1.ObjectReference, related *corev1.ObjectReference, reason, typ, action, controller, instance string) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: name},
			EventTime:           eventTime,
			ReportingController: controller,
			ReportingInstance:   instance,
			Action:              action,
			Reason:              reason,
			Regarding:           regarding,
			Related:             related,
			Note:                "msg:" + name,
			Type:                typ,
		}
	}
	appContainer := "spec.containers{app}"

	started := legacy(fsNSOne, "pod-a-started", pod(fsNSOne, "pod-a", "uid-pod-a", "100", appContainer),
		"Started", corev1.EventTypeNormal, "kubelet", "kubelet", "node-1")
	started.Source.Host = "node-1"
	backoff := legacy(fsNSOne, "pod-a-backoff", pod(fsNSOne, "pod-a", "uid-pod-a", "101", appContainer),
		"BackOff", corev1.EventTypeWarning, "kubelet", "kubelet", "node-1")
	backoff.Source.Host = "node-1"
	backoff.Count = 5
	scheduled := modern(fsNSOne, "pod-a-scheduled", pod(fsNSOne, "pod-a", "uid-pod-a", "99", ""),
		&corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "uid-node-1", APIVersion: "v1"},
		"Scheduled", corev1.EventTypeNormal, "Binding", "default-scheduler", "default-scheduler-host-1")
	rsCreated := legacy(fsNSOne, "rs-web-created",
		corev1.ObjectReference{Kind: "ReplicaSet", Namespace: fsNSOne, Name: "web", UID: "uid-rs-web", APIVersion: "apps/v1", ResourceVersion: "200"},
		"SuccessfulCreate", corev1.EventTypeNormal, "replicaset-controller", "replicaset-controller", "")
	rsCreated.Action = "Create"
	rsCreated.Related = &corev1.ObjectReference{Kind: "Pod", Namespace: fsNSOne, Name: "pod-a", UID: "uid-pod-a", APIVersion: "v1", FieldPath: appContainer}
	killing := legacy(fsNSTwo, "pod-a-killing", pod(fsNSTwo, "pod-a", "uid-pod-a-two", "300", appContainer),
		"Killing", corev1.EventTypeNormal, "kubelet", "kubelet", "node-2")
	// An Event as an old recorder writes it: source only, no reporting fields.
	notReady := legacy(fsNSDefault, "node-1-not-ready",
		corev1.ObjectReference{Kind: "Node", Name: "node-1", UID: "uid-node-1", APIVersion: "v1"},
		"NodeNotReady", corev1.EventTypeWarning, "node-controller", "", "")
	scaled := legacy(fsNSTwo, "deploy-web-scaled",
		corev1.ObjectReference{Kind: "Deployment", Namespace: fsNSTwo, Name: "web", UID: "uid-deploy-web", APIVersion: "apps/v1", ResourceVersion: "400"},
		"ScalingReplicaSet", corev1.EventTypeNormal, "deployment-controller", "deployment-controller", "deployment-controller-0")
	scaled.Action = "Scale"
	scaled.Related = &corev1.ObjectReference{Kind: "ReplicaSet", Namespace: fsNSTwo, Name: "web-5d4f", UID: "uid-rs-web-5d4f", APIVersion: "apps/v1"}
	failed := modern(fsNSTwo, "pod-c-failed", pod(fsNSTwo, "pod-c", "uid-pod-c", "500", "spec.initContainers{init}"),
		&corev1.ObjectReference{Kind: "Node", Name: "node-2", UID: "uid-node-2", APIVersion: "v1"},
		"Failed", corev1.EventTypeWarning, "Pulling", "kubelet", "node-2")

	return []fsFixture{
		{core: started}, {core: backoff}, {events: scheduled}, {core: rsCreated},
		{core: killing}, {core: notReady}, {core: scaled}, {events: failed},
	}
}

// fsFixtureKeys maps each fixture's name to "namespace/name".
var fsFixtureKeys = func() map[string]string {
	m := map[string]string{}
	for _, f := range fsFixtures() {
		key := f.key()
		m[key[strings.Index(key, "/")+1:]] = key
	}
	return m
}()

// fsAll is every fixture name.
var fsAll = func() []string {
	var names []string
	for name := range fsFixtureKeys {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}()

// fsAllBut is every fixture name except those given.
func fsAllBut(except ...string) []string {
	var out []string
	for _, name := range fsAll {
		if !slices.Contains(except, name) {
			out = append(out, name)
		}
	}
	return out
}

// fsInNamespace is every fixture name in ns.
func fsInNamespace(ns string) []string {
	var out []string
	for _, name := range fsAll {
		if strings.HasPrefix(fsFixtureKeys[name], ns+"/") {
			out = append(out, name)
		}
	}
	return out
}

// fsLoadFixtures creates the fixture Events (and, when createNamespaces is
// set, their namespaces, as kube-apiserver requires) and waits until a
// resourceVersion=0 LIST, which any watch cache may answer, sees them all.
func fsLoadFixtures(ctx context.Context, t *testing.T, client kubernetes.Interface, createNamespaces bool) {
	t.Helper()
	if createNamespaces {
		for _, ns := range []string{fsNSOne, fsNSTwo} {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create namespace %s: %v", ns, err)
			}
		}
	}
	for _, f := range fsFixtures() {
		var err error
		if f.core != nil {
			_, err = client.CoreV1().Events(f.core.Namespace).Create(ctx, f.core, metav1.CreateOptions{})
		} else {
			_, err = client.EventsV1().Events(f.events.Namespace).Create(ctx, f.events, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create fixture %s: %v", f.key(), err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		return len(fsOnlyFixtures(fsCoreKeys(list.Items))) == len(fsAll), nil
	})
	if err != nil {
		t.Fatalf("fixtures not all listed from the cache: %v", err)
	}
}

// fsCoreKeys and fsEventsKeys are the sorted "namespace/name" of listed Events.
func fsCoreKeys(items []corev1.Event) []string {
	keys := make([]string, 0, len(items))
	for _, e := range items {
		keys = append(keys, e.Namespace+"/"+e.Name)
	}
	sort.Strings(keys)
	return keys
}

func fsEventsKeys(items []eventsv1.Event) []string {
	keys := make([]string, 0, len(items))
	for _, e := range items {
		keys = append(keys, e.Namespace+"/"+e.Name)
	}
	sort.Strings(keys)
	return keys
}

// fsOnlyFixtures drops keys that are not fixture Events (kube-apiserver may
// record Events of its own).
func fsOnlyFixtures(keys []string) []string {
	out := []string{}
	for _, key := range keys {
		if fsFixtureKeys[key[strings.Index(key, "/")+1:]] == key {
			out = append(out, key)
		}
	}
	return out
}

// fsKeys turns fixture names into sorted "namespace/name" keys.
func fsKeys(t *testing.T, names []string) []string {
	t.Helper()
	keys := []string{}
	for _, name := range names {
		key, ok := fsFixtureKeys[name]
		if !ok {
			t.Fatalf("test bug: %q is not a fixture Event", name)
		}
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// The two served versions.
const (
	fsCore   = "core/v1"
	fsEvents = "events.k8s.io/v1"
)

// fsLabels is every field label each version accepts (pkg/fieldselectors),
// kube-apiserver's first.
var fsLabels = map[string][]string{
	fsCore: {
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type", "metadata.namespace", "metadata.name",

		"action", "reportingInstance",
		"related.kind", "related.namespace", "related.name", "related.uid", "related.apiVersion", "related.fieldPath",
		"involvedObjectOrRelated.kind", "involvedObjectOrRelated.namespace", "involvedObjectOrRelated.name", "involvedObjectOrRelated.uid",
	},
	fsEvents: {
		"regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
		"regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath",
		"reason", "reportingController", "type", "metadata.namespace", "metadata.name",

		"action", "reportingInstance",
		"related.kind", "related.namespace", "related.name", "related.uid", "related.apiVersion", "related.fieldPath",
		"regardingOrRelated.kind", "regardingOrRelated.namespace", "regardingOrRelated.name", "regardingOrRelated.uid",
	},
}

// fsKubeLabelCount is how many of each version's labels (the first ones in
// fsLabels) kube-apiserver v1.36.3 accepts.
var fsKubeLabelCount = map[string]int{fsCore: 13, fsEvents: 12}

// fsKubeLabel reports whether kube-apiserver accepts label on version.
func fsKubeLabel(version, label string) bool {
	return slices.Contains(fsLabels[version][:fsKubeLabelCount[version]], label)
}

// fsTranslate spells a core/v1 selector in events.k8s.io/v1 labels. It is
// used on the case table, whose selectors are written in core/v1 labels;
// `source` has no events.k8s.io/v1 label and is left as it is.
func fsTranslate(selector string) string {
	r := strings.NewReplacer(
		"involvedObjectOrRelated.", "regardingOrRelated.",
		"involvedObject.", "regarding.",
		"reportingComponent", "reportingController",
	)
	return r.Replace(selector)
}

// fsCase is one LIST with a field selector and the fixture Events it must
// return, or the unsupported label it must be refused for.
type fsCase struct {
	name string
	// namespace is the URL's namespace; "" lists all namespaces (-A).
	namespace string
	// selector is written in core/v1 labels; fsTranslate gives the
	// events.k8s.io/v1 spelling.
	selector string
	want     []string
	// coreOnly cases use labels events.k8s.io/v1 does not have.
	coreOnly bool
}

// fsCases is the table of LISTs, each valid on both versions (after
// fsTranslate) unless coreOnly.
var fsCases = []fsCase{
	{name: "no selector", namespace: "", selector: "", want: fsAll},
	{name: "no selector in namespace", namespace: fsNSOne, selector: "", want: fsInNamespace(fsNSOne)},

	{name: "involvedObject.kind=Pod", selector: "involvedObject.kind=Pod", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "pod-a-killing", "pod-c-failed"}},
	{name: "involvedObject.kind==ReplicaSet ns", namespace: fsNSOne, selector: "involvedObject.kind==ReplicaSet", want: []string{"rs-web-created"}},
	{name: "involvedObject.kind!=Pod", selector: "involvedObject.kind!=Pod", want: []string{"rs-web-created", "node-1-not-ready", "deploy-web-scaled"}},
	{name: "involvedObject.kind no match", namespace: fsNSOne, selector: "involvedObject.kind=StatefulSet", want: nil},

	{name: "involvedObject.namespace=fs-two", selector: "involvedObject.namespace=fs-two", want: []string{"pod-a-killing", "deploy-web-scaled", "pod-c-failed"}},
	{name: "involvedObject.namespace empty", selector: "involvedObject.namespace=", want: []string{"node-1-not-ready"}},
	{name: "involvedObject.namespace!=empty", selector: "involvedObject.namespace!=", want: fsAllBut("node-1-not-ready")},
	{name: "involvedObject.namespace other ns", namespace: fsNSOne, selector: "involvedObject.namespace=fs-two", want: nil},

	{name: "involvedObject.name ns", namespace: fsNSOne, selector: "involvedObject.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "involvedObject.name all", selector: "involvedObject.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "pod-a-killing"}},
	{name: "involvedObject.name==web", selector: "involvedObject.name==web", want: []string{"rs-web-created", "deploy-web-scaled"}},
	{name: "involvedObject.name!=pod-a ns", namespace: fsNSTwo, selector: "involvedObject.name!=pod-a", want: []string{"deploy-web-scaled", "pod-c-failed"}},
	{name: "involvedObject.name no match", selector: "involvedObject.name=pod-z", want: nil},

	{name: "involvedObject.uid all", selector: "involvedObject.uid=uid-pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "involvedObject.uid other ns", namespace: fsNSTwo, selector: "involvedObject.uid=uid-pod-a", want: nil},
	{name: "involvedObject.uid!=", selector: "involvedObject.uid!=uid-pod-a", want: fsAllBut("pod-a-started", "pod-a-backoff", "pod-a-scheduled")},

	{name: "involvedObject.apiVersion=apps/v1", selector: "involvedObject.apiVersion=apps/v1", want: []string{"rs-web-created", "deploy-web-scaled"}},
	{name: "involvedObject.apiVersion!=v1 ns", namespace: fsNSOne, selector: "involvedObject.apiVersion!=v1", want: []string{"rs-web-created"}},

	{name: "involvedObject.resourceVersion ns", namespace: fsNSOne, selector: "involvedObject.resourceVersion=100", want: []string{"pod-a-started"}},
	{name: "involvedObject.resourceVersion empty", selector: "involvedObject.resourceVersion=", want: []string{"node-1-not-ready"}},
	{name: "involvedObject.resourceVersion!=", selector: "involvedObject.resourceVersion!=100", want: fsAllBut("pod-a-started")},

	{name: "involvedObject.fieldPath", selector: "involvedObject.fieldPath=spec.containers{app}", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing"}},
	{name: "involvedObject.fieldPath init", selector: "involvedObject.fieldPath=spec.initContainers{init}", want: []string{"pod-c-failed"}},
	{name: "involvedObject.fieldPath!= ns", namespace: fsNSOne, selector: "involvedObject.fieldPath!=spec.containers{app}", want: []string{"pod-a-scheduled", "rs-web-created"}},
	{name: "involvedObject.fieldPath empty", selector: "involvedObject.fieldPath=", want: []string{"pod-a-scheduled", "rs-web-created", "node-1-not-ready", "deploy-web-scaled"}},

	{name: "reason ns", namespace: fsNSOne, selector: "reason=BackOff", want: []string{"pod-a-backoff"}},
	{name: "reason==", selector: "reason==Failed", want: []string{"pod-c-failed"}},
	{name: "reason!= ns", namespace: fsNSOne, selector: "reason!=BackOff", want: []string{"pod-a-started", "pod-a-scheduled", "rs-web-created"}},
	{name: "reason no match", selector: "reason=Nothing", want: nil},

	{name: "reportingComponent=kubelet", selector: "reportingComponent=kubelet", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "pod-c-failed"}},
	{name: "reportingComponent=default-scheduler", selector: "reportingComponent=default-scheduler", want: []string{"pod-a-scheduled"}},
	{name: "reportingComponent empty", selector: "reportingComponent=", want: []string{"node-1-not-ready"}},
	{name: "reportingComponent!= ns", namespace: fsNSTwo, selector: "reportingComponent!=kubelet", want: []string{"deploy-web-scaled"}},
	{name: "reportingComponent is not source", selector: "reportingComponent=node-controller", want: nil},

	{name: "source=kubelet", selector: "source=kubelet", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "pod-c-failed"}, coreOnly: true},
	{name: "source falls back to reportingController", selector: "source=default-scheduler", want: []string{"pod-a-scheduled"}, coreOnly: true},
	{name: "source ns default", namespace: fsNSDefault, selector: "source=node-controller", want: []string{"node-1-not-ready"}, coreOnly: true},
	{name: "source!=", selector: "source!=kubelet", want: []string{"pod-a-scheduled", "rs-web-created", "node-1-not-ready", "deploy-web-scaled"}, coreOnly: true},
	{name: "source empty", selector: "source=", want: nil, coreOnly: true},

	{name: "type=Warning", selector: "type=Warning", want: []string{"pod-a-backoff", "node-1-not-ready", "pod-c-failed"}},
	{name: "type!=Warning ns", namespace: fsNSOne, selector: "type!=Warning", want: []string{"pod-a-started", "pod-a-scheduled", "rs-web-created"}},
	{name: "type no match", selector: "type=Error", want: nil},

	{name: "metadata.namespace all", selector: "metadata.namespace=fs-two", want: fsInNamespace(fsNSTwo)},
	{name: "metadata.namespace other ns", namespace: fsNSOne, selector: "metadata.namespace=fs-two", want: nil},
	{name: "metadata.namespace same ns", namespace: fsNSOne, selector: "metadata.namespace=fs-one", want: fsInNamespace(fsNSOne)},
	{name: "metadata.namespace!=", selector: "metadata.namespace!=fs-one", want: fsAllBut(fsInNamespace(fsNSOne)...)},

	{name: "metadata.name ns", namespace: fsNSOne, selector: "metadata.name=pod-a-started", want: []string{"pod-a-started"}},
	{name: "metadata.name all", selector: "metadata.name=pod-a-started", want: []string{"pod-a-started"}},
	{name: "metadata.name other ns", namespace: fsNSTwo, selector: "metadata.name=pod-a-started", want: nil},
	{name: "metadata.name!= ns", namespace: fsNSOne, selector: "metadata.name!=pod-a-started", want: []string{"pod-a-backoff", "pod-a-scheduled", "rs-web-created"}},

	{name: "action", selector: "action=Binding", want: []string{"pod-a-scheduled"}},
	{name: "action empty", selector: "action=", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "node-1-not-ready"}},
	{name: "action!=empty", selector: "action!=", want: []string{"pod-a-scheduled", "rs-web-created", "deploy-web-scaled", "pod-c-failed"}},
	{name: "action!= ns", namespace: fsNSTwo, selector: "action!=Scale", want: []string{"pod-a-killing", "pod-c-failed"}},

	{name: "reportingInstance", selector: "reportingInstance=node-2", want: []string{"pod-a-killing", "pod-c-failed"}},
	{name: "reportingInstance empty", selector: "reportingInstance=", want: []string{"rs-web-created", "node-1-not-ready"}},
	{name: "reportingInstance!= ns", namespace: fsNSOne, selector: "reportingInstance!=node-1", want: []string{"pod-a-scheduled", "rs-web-created"}},

	{name: "related.kind", selector: "related.kind=Node", want: []string{"pod-a-scheduled", "pod-c-failed"}},
	{name: "related.kind empty", selector: "related.kind=", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "node-1-not-ready"}},
	{name: "related.kind!= ns", namespace: fsNSOne, selector: "related.kind!=Node", want: []string{"pod-a-started", "pod-a-backoff", "rs-web-created"}},

	{name: "related.namespace", selector: "related.namespace=fs-one", want: []string{"rs-web-created"}},
	{name: "related.namespace empty", selector: "related.namespace=", want: fsAllBut("rs-web-created", "deploy-web-scaled")},
	{name: "related.namespace!=empty", selector: "related.namespace!=", want: []string{"rs-web-created", "deploy-web-scaled"}},

	{name: "related.name node", selector: "related.name=node-1", want: []string{"pod-a-scheduled"}},
	{name: "related.name pod", selector: "related.name=pod-a", want: []string{"rs-web-created"}},
	{name: "related.name!= ns", namespace: fsNSTwo, selector: "related.name!=web-5d4f", want: []string{"pod-a-killing", "pod-c-failed"}},
	{name: "related.name empty", selector: "related.name=", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "node-1-not-ready"}},

	{name: "related.uid pod", selector: "related.uid=uid-pod-a", want: []string{"rs-web-created"}},
	{name: "related.uid node", selector: "related.uid=uid-node-2", want: []string{"pod-c-failed"}},
	{name: "related.uid!=empty", selector: "related.uid!=", want: []string{"pod-a-scheduled", "rs-web-created", "deploy-web-scaled", "pod-c-failed"}},
	{name: "related.uid other ns", namespace: fsNSOne, selector: "related.uid=uid-node-2", want: nil},

	{name: "related.apiVersion apps", selector: "related.apiVersion=apps/v1", want: []string{"deploy-web-scaled"}},
	{name: "related.apiVersion v1", selector: "related.apiVersion=v1", want: []string{"pod-a-scheduled", "rs-web-created", "pod-c-failed"}},
	{name: "related.apiVersion!= ns", namespace: fsNSOne, selector: "related.apiVersion!=v1", want: []string{"pod-a-started", "pod-a-backoff"}},

	{name: "related.fieldPath", selector: "related.fieldPath=spec.containers{app}", want: []string{"rs-web-created"}},
	{name: "related.fieldPath!=", selector: "related.fieldPath!=spec.containers{app}", want: fsAllBut("rs-web-created")},
	{name: "related.fieldPath empty ns", namespace: fsNSTwo, selector: "related.fieldPath=", want: fsInNamespace(fsNSTwo)},

	// OR labels: an Event matches `=` when its regarding or its related
	// object has the value, and `!=` when neither has it. An absent related
	// reads as a zero ObjectReference (empty values).
	{name: "involvedObjectOrRelated.kind Node", selector: "involvedObjectOrRelated.kind=Node", want: []string{"pod-a-scheduled", "node-1-not-ready", "pod-c-failed"}},
	{name: "involvedObjectOrRelated.kind ReplicaSet", selector: "involvedObjectOrRelated.kind=ReplicaSet", want: []string{"rs-web-created", "deploy-web-scaled"}},
	{name: "involvedObjectOrRelated.kind!=", selector: "involvedObjectOrRelated.kind!=Pod", want: []string{"node-1-not-ready", "deploy-web-scaled"}},
	{name: "involvedObjectOrRelated.kind no match ns", namespace: fsNSOne, selector: "involvedObjectOrRelated.kind=Deployment", want: nil},

	{name: "involvedObjectOrRelated.namespace", selector: "involvedObjectOrRelated.namespace=fs-one", want: fsInNamespace(fsNSOne)},
	{name: "involvedObjectOrRelated.namespace empty", selector: "involvedObjectOrRelated.namespace=", want: fsAllBut("rs-web-created", "deploy-web-scaled")},
	{name: "involvedObjectOrRelated.namespace!=", selector: "involvedObjectOrRelated.namespace!=fs-one", want: fsAllBut(fsInNamespace(fsNSOne)...)},

	{name: "involvedObjectOrRelated.name all", selector: "involvedObjectOrRelated.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "rs-web-created", "pod-a-killing"}},
	{name: "involvedObjectOrRelated.name node ns", namespace: fsNSOne, selector: "involvedObjectOrRelated.name=node-1", want: []string{"pod-a-scheduled"}},
	{name: "involvedObjectOrRelated.name node all", selector: "involvedObjectOrRelated.name=node-1", want: []string{"pod-a-scheduled", "node-1-not-ready"}},
	{name: "involvedObjectOrRelated.name!= ns", namespace: fsNSOne, selector: "involvedObjectOrRelated.name!=pod-a", want: nil},
	{name: "involvedObjectOrRelated.name!= all", selector: "involvedObjectOrRelated.name!=pod-a", want: []string{"node-1-not-ready", "deploy-web-scaled", "pod-c-failed"}},

	{name: "involvedObjectOrRelated.uid pod", selector: "involvedObjectOrRelated.uid=uid-pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "rs-web-created"}},
	{name: "involvedObjectOrRelated.uid pod ns", namespace: fsNSOne, selector: "involvedObjectOrRelated.uid=uid-pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "rs-web-created"}},
	{name: "involvedObjectOrRelated.uid node", selector: "involvedObjectOrRelated.uid=uid-node-1", want: []string{"pod-a-scheduled", "node-1-not-ready"}},
	{name: "involvedObjectOrRelated.uid other ns", namespace: fsNSTwo, selector: "involvedObjectOrRelated.uid=uid-pod-a", want: nil},
	{name: "involvedObjectOrRelated.uid!= ns", namespace: fsNSOne, selector: "involvedObjectOrRelated.uid!=uid-pod-a", want: nil},
	{name: "involvedObjectOrRelated.uid!= all", selector: "involvedObjectOrRelated.uid!=uid-pod-a", want: []string{"pod-a-killing", "node-1-not-ready", "deploy-web-scaled", "pod-c-failed"}},
	{name: "involvedObjectOrRelated.uid empty", selector: "involvedObjectOrRelated.uid=", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-killing", "node-1-not-ready"}},

	// What clients send (research notes section 6).
	{name: "kubectl describe pod", namespace: fsNSOne, selector: "involvedObject.name=pod-a,involvedObject.namespace=fs-one,involvedObject.uid=uid-pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "kubectl describe pod other order", namespace: fsNSOne, selector: "involvedObject.uid=uid-pod-a,involvedObject.name=pod-a,involvedObject.namespace=fs-one", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "kubectl describe pod same name other ns", namespace: fsNSTwo, selector: "involvedObject.name=pod-a,involvedObject.namespace=fs-two,involvedObject.uid=uid-pod-a-two", want: []string{"pod-a-killing"}},
	{name: "kubectl describe pod wrong uid", namespace: fsNSTwo, selector: "involvedObject.name=pod-a,involvedObject.namespace=fs-two,involvedObject.uid=uid-pod-a", want: nil},
	{name: "kubectl describe node", selector: "involvedObject.kind=Node,involvedObject.uid=uid-node-1,involvedObject.name=node-1,involvedObject.namespace=", want: []string{"node-1-not-ready"}},
	{name: "kubectl describe node by name as uid", selector: "involvedObject.kind=Node,involvedObject.uid=node-1,involvedObject.name=node-1,involvedObject.namespace=", want: nil},
	{name: "kubectl events for pod ns", namespace: fsNSOne, selector: "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "kubectl events for pod all", selector: "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "pod-a-killing"}},
	{name: "kubectl events for deployment", namespace: fsNSTwo, selector: "involvedObject.kind=Deployment,involvedObject.apiVersion=apps/v1,involvedObject.name=web", want: []string{"deploy-web-scaled"}},
	{name: "kubectl events for wrong apiVersion", namespace: fsNSTwo, selector: "involvedObject.kind=Deployment,involvedObject.apiVersion=v1,involvedObject.name=web", want: nil},

	// Several requirements: all must hold.
	{name: "type and reportingComponent", selector: "type=Warning,reportingComponent=kubelet", want: []string{"pod-a-backoff", "pod-c-failed"}},
	{name: "two !=", selector: "type!=Normal,reason!=Failed", want: []string{"pod-a-backoff", "node-1-not-ready"}},
	{name: "metadata.namespace and name", selector: "metadata.namespace=fs-one,involvedObject.name=pod-a", want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "contradiction", selector: "involvedObject.name=pod-a,involvedObject.name!=pod-a", want: nil},
	{name: "OR label and type", selector: "involvedObjectOrRelated.uid=uid-pod-a,type=Normal", want: []string{"pod-a-started", "pod-a-scheduled", "rs-web-created"}},
	{name: "OR label twice", selector: "involvedObjectOrRelated.uid=uid-pod-a,involvedObjectOrRelated.uid=uid-node-1", want: []string{"pod-a-scheduled"}},
	{name: "OR label and !=", selector: "involvedObjectOrRelated.name=pod-a,involvedObject.name!=pod-a", want: []string{"rs-web-created"}},
	{name: "related and action", selector: "related.kind=Node,action=Pulling,reportingInstance=node-2", want: []string{"pod-c-failed"}},
}

// fsErrorCase is a LIST refused for an unsupported label.
type fsErrorCase struct {
	name      string
	version   string
	namespace string
	selector  string
	// label is the one named in the 400's message.
	label string
}

// fsErrorCases are refused with 400 `field label not supported: <label>`.
var fsErrorCases = []fsErrorCase{
	{name: "regarding.name", version: fsCore, selector: "regarding.name=pod-a", label: "regarding.name"},
	{name: "reportingController", version: fsCore, namespace: fsNSOne, selector: "reportingController=kubelet", label: "reportingController"},
	{name: "regardingOrRelated.uid", version: fsCore, selector: "regardingOrRelated.uid=uid-pod-a", label: "regardingOrRelated.uid"},
	{name: "note", version: fsCore, selector: "note=x", label: "note"},
	{name: "note.contains", version: fsCore, namespace: fsNSOne, selector: "note.contains=x509", label: "note.contains"},
	{name: "message", version: fsCore, namespace: fsNSOne, selector: "message=x", label: "message"},
	{name: "metadata.uid", version: fsCore, selector: "metadata.uid=x", label: "metadata.uid"},
	{name: "count", version: fsCore, selector: "count!=1", label: "count"},
	{name: "empty value", version: fsCore, selector: "note=", label: "note"},
	{name: "one bad of several", version: fsCore, namespace: fsNSOne, selector: "involvedObject.name=pod-a,message=x,reason=BackOff", label: "message"},

	{name: "involvedObject.name", version: fsEvents, selector: "involvedObject.name=pod-a", label: "involvedObject.name"},
	{name: "involvedObject.uid ns", version: fsEvents, namespace: fsNSOne, selector: "involvedObject.uid=uid-pod-a", label: "involvedObject.uid"},
	{name: "involvedObjectOrRelated.uid", version: fsEvents, selector: "involvedObjectOrRelated.uid=uid-pod-a", label: "involvedObjectOrRelated.uid"},
	{name: "source", version: fsEvents, selector: "source=kubelet", label: "source"},
	{name: "reportingComponent", version: fsEvents, selector: "reportingComponent=kubelet", label: "reportingComponent"},
	{name: "note", version: fsEvents, namespace: fsNSOne, selector: "note=x", label: "note"},
	{name: "note.contains", version: fsEvents, selector: "note.contains=x509", label: "note.contains"},
	{name: "message", version: fsEvents, selector: "message=x", label: "message"},
	{name: "deprecatedCount", version: fsEvents, selector: "deprecatedCount=1", label: "deprecatedCount"},
	{name: "one bad of several", version: fsEvents, selector: "regarding.name=pod-a,involvedObject.name=pod-a", label: "involvedObject.name"},
}

// fsList lists Events of one version with a field selector and returns the
// sorted "namespace/name" keys.
func fsList(ctx context.Context, client kubernetes.Interface, version, namespace string, opts metav1.ListOptions) ([]string, error) {
	switch version {
	case fsCore:
		list, err := client.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return fsCoreKeys(list.Items), nil
	case fsEvents:
		list, err := client.EventsV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return fsEventsKeys(list.Items), nil
	}
	return nil, fmt.Errorf("test bug: unknown version %q", version)
}

// fsListPaged lists like fsList, limit items a page, following continue.
func fsListPaged(ctx context.Context, client kubernetes.Interface, version, namespace, selector string, limit int64) ([]string, int, error) {
	var keys []string
	opts := metav1.ListOptions{FieldSelector: selector, Limit: limit}
	for pages := 1; ; pages++ {
		var cont string
		switch version {
		case fsCore:
			list, err := client.CoreV1().Events(namespace).List(ctx, opts)
			if err != nil {
				return nil, pages, err
			}
			keys, cont = append(keys, fsCoreKeys(list.Items)...), list.Continue
		case fsEvents:
			list, err := client.EventsV1().Events(namespace).List(ctx, opts)
			if err != nil {
				return nil, pages, err
			}
			keys, cont = append(keys, fsEventsKeys(list.Items)...), list.Continue
		}
		if cont == "" {
			sort.Strings(keys)
			if keys == nil {
				keys = []string{}
			}
			return keys, pages, nil
		}
		if pages > 100 {
			return nil, pages, fmt.Errorf("more than 100 pages")
		}
		opts.Continue = cont
	}
}

// fsStatus is the part of a refusal the tests compare.
type fsStatus struct {
	Code    int32
	Reason  metav1.StatusReason
	Message string
	Status  string
}

// fsStatusOf extracts the Status of an API error; ok is false when err is
// not one.
func fsStatusOf(err error) (fsStatus, bool) {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		return fsStatus{}, false
	}
	s := status.Status()
	return fsStatus{Code: s.Code, Reason: s.Reason, Message: s.Message, Status: s.Status}, true
}

// fsUnsupported is the refusal of an unsupported field label, as
// kube-apiserver words it (apiserver/pkg/endpoints/handlers/get.go).
func fsUnsupported(label string) fsStatus {
	return fsStatus{
		Code:    http.StatusBadRequest,
		Reason:  metav1.StatusReasonBadRequest,
		Message: "field label not supported: " + label,
		Status:  metav1.StatusFailure,
	}
}

// fsScope names a LIST's scope for subtest names.
func fsScope(namespace string) string {
	if namespace == "" {
		return "all"
	}
	return "ns=" + namespace
}

// fsVersionCases is the table for one version: the shared cases, translated
// for events.k8s.io/v1 (without the core-only ones).
func fsVersionCases(version string) []fsCase {
	var out []fsCase
	for _, c := range fsCases {
		if version == fsEvents {
			if c.coreOnly {
				continue
			}
			c.selector = fsTranslate(c.selector)
			c.name = fsTranslate(c.name)
		}
		out = append(out, c)
	}
	return out
}
