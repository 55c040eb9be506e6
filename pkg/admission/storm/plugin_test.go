package storm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

var (
	coreEvents   = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	eventsEvents = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
	eventKind    = schema.GroupVersionKind{Version: "v1", Kind: "Event"}
)

// kubeletEvent is a core/v1 Event as tools/record writes it for a kubelet.
func kubeletEvent(name, node string) *core.Event {
	return &core.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject:      core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:              "BackOff",
		Message:             "Back-off restarting failed container",
		Source:              core.EventSource{Component: "kubelet", Host: node},
		ReportingController: "kubelet",
		ReportingInstance:   node,
		Count:               1,
		Type:                "Warning",
	}
}

func attrs(obj runtime.Object, op admission.Operation, gvr schema.GroupVersionResource, dryRun bool) admission.Attributes {
	var old runtime.Object
	if op == admission.Update {
		old = obj
	}
	name := ""
	if e, ok := obj.(*core.Event); ok {
		name = e.Name
	}
	return admission.NewAttributesRecord(obj, old, eventKind, "default", name, gvr, "", op, nil, dryRun,
		&user.DefaultInfo{Name: "system:node:n1"})
}

func TestPluginThrottles(t *testing.T) {
	clock := newFakeClock()
	p := New(Config{
		Create:       limitOf(1, 2),
		Update:       limitOf(1, 1),
		MaxReporters: 100,
		Now:          clock.now,
	})
	ctx := context.Background()
	validate := func(e *core.Event, op admission.Operation, gvr schema.GroupVersionResource, dryRun bool) error {
		return p.Admit(ctx, attrs(e, op, gvr, dryRun), nil)
	}

	// Two creates from node-1 through either API are its burst.
	if err := validate(kubeletEvent("a", "node-1"), admission.Create, coreEvents, false); err != nil {
		t.Fatal(err)
	}
	if err := validate(kubeletEvent("b", "node-1"), admission.Create, eventsEvents, false); err != nil {
		t.Fatal(err)
	}
	// A dry run spends nothing.
	if err := validate(kubeletEvent("c", "node-1"), admission.Create, coreEvents, true); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	err := validate(kubeletEvent("c", "node-1"), admission.Create, coreEvents, false)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("third create: %v, want 429", err)
	}
	if seconds, ok := apierrors.SuggestsClientDelay(err); !ok || seconds != 1 {
		t.Errorf("retry after %d (%v), want 1s", seconds, ok)
	}
	if msg := err.Error(); !strings.Contains(msg, `reporter "kubelet/node-1 (user system:node:n1)"`) {
		t.Errorf("message %q does not name the reporter", msg)
	}
	// Another node is not affected, and node-1's series still counts.
	if err := validate(kubeletEvent("d", "node-2"), admission.Create, coreEvents, false); err != nil {
		t.Errorf("other reporter: %v", err)
	}
	if err := validate(kubeletEvent("a", "node-1"), admission.Update, coreEvents, false); err != nil {
		t.Errorf("update: %v", err)
	}
	clock.step(time.Second)
	if err := validate(kubeletEvent("c", "node-1"), admission.Create, coreEvents, false); err != nil {
		t.Errorf("create after a second: %v", err)
	}
}

func TestPluginIgnoresOtherRequests(t *testing.T) {
	p := New(Config{Create: limitOf(1, 1), MaxReporters: 10, MaxEventBytes: 10})
	ctx := context.Background()
	other := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for i := range 3 {
		if err := p.Admit(ctx, attrs(kubeletEvent(fmt.Sprint(i), "n"), admission.Create, other, false), nil); err != nil {
			t.Fatalf("pods: %v", err)
		}
	}
	if p.Handles(admission.Delete) || p.Handles(admission.Connect) {
		t.Error("the plugin must only handle creates and updates")
	}
}

func TestPluginSizeLimit(t *testing.T) {
	event := kubeletEvent("big", "n")
	size, err := storedSize(event)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		limit    int64
		grow     int
		wantCode int
	}{
		{name: "at the limit", limit: int64(size), wantCode: 0},
		{name: "one byte over", limit: int64(size), grow: 1, wantCode: http.StatusRequestEntityTooLarge},
		{name: "no limit", limit: 0, grow: 4 << 20, wantCode: 0},
		{name: "2 MiB message, default limit", limit: DefaultMaxEventBytes, grow: 2 << 20, wantCode: http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{MaxReporters: 10, MaxEventBytes: tc.limit})
			e := event.DeepCopy()
			e.Message += strings.Repeat("x", tc.grow)
			for _, op := range []admission.Operation{admission.Create, admission.Update} {
				// The size is refused in the validating phase only, after
				// the strategy's validation, as kube-apiserver would first
				// answer 422 for an invalid Event.
				if err := p.Admit(context.Background(), attrs(e, op, coreEvents, false), nil); err != nil {
					t.Errorf("%s: Admit refused %v; the size is Validate's to refuse", op, err)
				}
				err := p.Validate(context.Background(), attrs(e, op, coreEvents, false), nil)
				code := 0
				if err != nil {
					code = int(err.(apierrors.APIStatus).Status().Code)
				}
				if code != tc.wantCode {
					t.Errorf("%s: got %v, want code %d", op, err, tc.wantCode)
				}
			}
		})
	}
}

func TestReporterOf(t *testing.T) {
	alice, bob := &user.DefaultInfo{Name: "alice"}, &user.DefaultInfo{Name: "bob"}
	scheduler := core.Event{ReportingController: "default-scheduler", ReportingInstance: "default-scheduler-cp1",
		Source: core.EventSource{Component: "ignored"}}
	kubelet := core.Event{Source: core.EventSource{Component: "kubelet", Host: "node-1"}}
	huge := core.Event{Source: core.EventSource{Component: strings.Repeat("c", 1<<20), Host: strings.Repeat("h", 1<<20)}}
	cases := []struct {
		name       string
		event      core.Event
		who        user.Info
		wantName   string
		wantC      string
		sameKeyAs  *reporter
		otherKeyAs *reporter
	}{
		{name: "events.k8s.io/v1 and tools/record: reporting fields", event: scheduler, who: alice,
			wantName: "default-scheduler/default-scheduler-cp1 (user alice)", wantC: "default-scheduler"},
		{name: "legacy core/v1: source", event: kubelet, who: alice,
			wantName: "kubelet/node-1 (user alice)", wantC: "kubelet"},
		{name: "nothing: the user", event: core.Event{}, who: alice, wantName: "user/alice", wantC: ""},
		{name: "huge names: bounded", event: huge, who: alice,
			wantName: strings.Repeat("c", maxNameLength) + "...", wantC: strings.Repeat("c", 1<<20)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := reporterOf(&tc.event, tc.who)
			if r.name != tc.wantName || r.controller != tc.wantC {
				t.Errorf("got %q %q, want %q %q", r.name, r.controller, tc.wantName, tc.wantC)
			}
			if len(r.key) != keySize || len(r.userKey) != keySize {
				t.Errorf("keys of %d and %d bytes, want %d", len(r.key), len(r.userKey), keySize)
			}
		})
	}
	// The user is part of the key: bob naming alice's reporter does not
	// spend alice's budget.
	if reporterOf(&scheduler, alice).key == reporterOf(&scheduler, bob).key {
		t.Error("two users share a reporter key")
	}
	// Every reporter of one user shares the user's key.
	if reporterOf(&scheduler, alice).userKey != reporterOf(&kubelet, alice).userKey {
		t.Error("one user's reporters have different user keys")
	}
	if reporterOf(&scheduler, alice).key == reporterOf(&kubelet, alice).key {
		t.Error("two reporters of one user share a key")
	}
}

func TestClassesAreBounded(t *testing.T) {
	clock := newFakeClock()
	var forgotten []string
	c := newClasses(clock.now, func(class string) { forgotten = append(forgotten, class) })
	if got := c.of(""); got != classUnknown {
		t.Errorf("empty: %q", got)
	}
	for i := range maxClasses {
		if got := c.of(fmt.Sprintf("controller-%d", i)); got != fmt.Sprintf("controller-%d", i) {
			t.Fatalf("controller-%d: %q", i, got)
		}
	}
	if got := c.of("one-too-many"); got != classOther {
		t.Errorf("past the bound: %q, want %q", got, classOther)
	}
	if got := c.of("controller-7"); got != "controller-7" {
		t.Errorf("known: %q", got)
	}
	// Once the first names have been idle, new names take their place and
	// the idle names' series are deleted.
	clock.step(classIdle / 2)
	c.of("controller-7")
	clock.step(classIdle/2 + time.Second)
	if got := c.of("newcomer"); got != "newcomer" {
		t.Errorf("after the others went idle: %q, want the name itself", got)
	}
	if len(forgotten) != 1 || forgotten[0] == "controller-7" {
		t.Errorf("forgotten %q, want one idle class other than the one in use", forgotten)
	}
	if got := c.of("controller-7"); got != "controller-7" {
		t.Errorf("in use: %q", got)
	}
	c = newClasses(clock.now, nil)
	if got := c.of(strings.Repeat("\xff", 100)); got != strings.Repeat("?", 1) {
		t.Errorf("invalid UTF-8 not cleaned: %q", got)
	}
}

// TestChargeMemoOnlyForUpdates: PUT and PATCH, which the registry may retry
// with admission, get a memo; any other request goes on as it came.
func TestChargeMemoOnlyForUpdates(t *testing.T) {
	for _, tc := range []struct {
		method string
		memo   bool
	}{
		{method: http.MethodPut, memo: true},
		{method: http.MethodPatch, memo: true},
		{method: http.MethodPost},
		{method: http.MethodGet},
		{method: http.MethodDelete},
	} {
		t.Run(tc.method, func(t *testing.T) {
			var got *chargeMemo
			WithChargeMemo(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				got, _ = r.Context().Value(memoKey{}).(*chargeMemo)
			})).ServeHTTP(nil, httptest.NewRequest(tc.method, "/", nil))
			if (got != nil) != tc.memo {
				t.Errorf("memo %v, want %v", got != nil, tc.memo)
			}
		})
	}
}

// TestPluginChargesOncePerRequest: admission run again for the same
// request (an update retried on a conflict) reuses the first decision; a new
// request is charged.
func TestPluginChargesOncePerRequest(t *testing.T) {
	p := New(Config{Update: limitOf(0.001, 1), MaxReporters: 100})
	var ctx context.Context
	// The memo is installed by WithChargeMemo; take its context.
	WithChargeMemo(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() })).
		ServeHTTP(nil, httptest.NewRequest(http.MethodPut, "/", nil))
	e := kubeletEvent("retried", "node-1")
	for attempt := range 3 {
		if err := p.Admit(ctx, attrs(e, admission.Update, coreEvents, false), nil); err != nil {
			t.Fatalf("attempt %d of one request: %v", attempt, err)
		}
	}
	if err := p.Admit(context.Background(), attrs(e, admission.Update, coreEvents, false), nil); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a second request: %v, want 429: the retries of the first must have spent one token only", err)
	}
}

// TestPluginOversizeNotCharged: an Event that Validate will refuse for its
// size spends none of its reporter's tokens in Admit.
func TestPluginOversizeNotCharged(t *testing.T) {
	p := New(Config{Create: limitOf(0.001, 1), MaxReporters: 100, MaxEventBytes: 1024})
	big := kubeletEvent("big", "node-1")
	big.Message = strings.Repeat("x", 2048)
	for range 3 {
		if err := p.Admit(context.Background(), attrs(big, admission.Create, coreEvents, false), nil); err != nil {
			t.Fatalf("oversize Event refused in Admit: %v", err)
		}
	}
	if err := p.Admit(context.Background(), attrs(kubeletEvent("small", "node-1"), admission.Create, coreEvents, false), nil); err != nil {
		t.Errorf("the reporter's one token was spent on Events refused for their size: %v", err)
	}
}

// countingPlugin stands for a mutating webhook: it counts its calls.
type countingPlugin struct {
	*admission.Handler
	calls int
}

func (c *countingPlugin) Admit(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	c.calls++
	return nil
}

// TestPluginRefusesBeforeWebhooks: in the chain the server builds (storm
// first), a throttled write never reaches the mutating plugins after it.
func TestPluginRefusesBeforeWebhooks(t *testing.T) {
	p := New(Config{Create: limitOf(0.001, 1), MaxReporters: 100})
	webhook := &countingPlugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
	chain := admission.NewChainHandler(p, webhook)
	var mutating admission.MutationInterface = chain
	for i := range 5 {
		_ = mutating.Admit(context.Background(), attrs(kubeletEvent(fmt.Sprint(i), "node-1"), admission.Create, coreEvents, false), nil)
	}
	if webhook.calls != 1 {
		t.Errorf("the webhook was called %d times for 5 writes of which 1 was within budget, want 1", webhook.calls)
	}
}
