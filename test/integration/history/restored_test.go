package history

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryOnlyRestoredEtcd: history captured from one kube-apiserver up
// to a resourceVersion far ahead of a second kube-apiserver on a fresh etcd,
// as after an etcd restored from an old backup. kube-apiserver (defaults:
// Events read from etcd, no watch cache) keeps a watch from that future
// resourceVersion silent, so capture checks: once the second kube-apiserver's
// resourceVersion has stayed behind for --history-capture-behind-timeout it
// relists, counts it (relists_total{reason="restored"}, the revisions it went
// back by), logs it, and follows the new Events. Its progress went back with
// it: a restart resumes without another relist.
func TestHistoryOnlyRestoredEtcd(t *testing.T) {
	t.Parallel()
	// Two kube-apiservers start in turn: longer than framework.PollCtx's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	oldEtcd := framework.StartEtcd(t)
	oldKube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{EtcdServers: oldEtcd.ClientURL()})
	ns := framework.UniqueName("history-restored")
	// Revisions the fresh cluster will not reach during the test.
	bumpRevision(ctx, t, oldEtcd, 2000)
	createEvent(ctx, t, oldKube.Client(t), ns, "before-restore")

	const timeout = "4s"
	r := framework.StartHistoryOnlyReplica(t, oldKube, []string{"--history-capture-behind-timeout=" + timeout})
	waitRecord := func(name string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(context.Context) (bool, error) {
			for _, rec := range framework.ListAllEventRecords(t, r.Client, ns, "", 500) {
				if rec.Event.Name == name {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s not in history: %v\n%s", name, err, r.Proc.Tail(40))
		}
	}
	waitRecord("before-restore")
	if err := r.Proc.Stop(); err != nil {
		t.Fatal(err)
	}

	newEtcd := framework.StartEtcd(t)
	newKube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{EtcdServers: newEtcd.ClientURL()})
	newClient := newKube.Client(t)
	oldRV, newRV := currentRV(ctx, t, oldKube.Client(t)), currentRV(ctx, t, newClient)
	if newRV+1000 > oldRV {
		t.Fatalf("the fresh kube-apiserver is at resourceVersion %d, not far below the first one's %d", newRV, oldRV)
	}
	createEvent(ctx, t, newClient, ns, "after-restore-1")
	r.Proc.Args = withKubeconfig(r.Proc.Args, newKube.KubeconfigPath)
	r.Client.Token = newKube.AdminToken
	r.Start(t)
	waitRecord("after-restore-1")
	createEvent(ctx, t, newClient, ns, "after-restore-2")
	waitRecord("after-restore-2")
	waitRecord("before-restore")
	if got := r.Metric(t, `event_apiserver_history_capture_relists_total{reason="restored",source="kubernetes"}`); got != 1 {
		t.Errorf("relists_total{reason=restored} = %v, want 1", got)
	}
	if got := r.Metric(t, `event_apiserver_history_capture_relist_rewound_revisions_total{source="kubernetes"}`); got < 1000 {
		t.Errorf("relist_rewound_revisions_total = %v, want the ~%d revisions between the two clusters", got, oldRV-newRV)
	}
	if log := r.Proc.Tail(400); !strings.Contains(log, "resourceVersion has stayed behind the one history captured up to") {
		t.Errorf("no log line says capture relisted after kube-apiserver went back:\n%s", log)
	}

	// The stored progress went back too: a restart resumes from it.
	if err := r.Proc.Stop(); err != nil {
		t.Fatal(err)
	}
	r.Start(t)
	createEvent(ctx, t, newClient, ns, "after-restart")
	waitRecord("after-restart")
	if got := r.Metric(t, `event_apiserver_history_capture_relists_total{reason="restored",source="kubernetes"}`); got != 0 {
		t.Errorf("after a restart, relists_total{reason=restored} = %v, want 0: progress was not rewound", got)
	}
}

// bumpRevision advances etcd's revision by n with writes outside the
// Kubernetes prefix.
func bumpRevision(ctx context.Context, t *testing.T, etcd *framework.Etcd, n int) {
	t.Helper()
	client := etcd.Client(t)
	const writers = 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/writers; i++ {
				if _, err := client.Put(ctx, fmt.Sprintf("/bump/%d", w), strconv.Itoa(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func createEvent(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	now := metav1.Now()
	if _, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name},
		Reason:         "Restored", Message: "test", Type: corev1.EventTypeNormal,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source: corev1.EventSource{Component: "test"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// currentRV is kube-apiserver's resourceVersion, from a consistent list.
func currentRV(ctx context.Context, t *testing.T, client kubernetes.Interface) int64 {
	t.Helper()
	list, err := client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func withKubeconfig(args []string, path string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if strings.HasPrefix(a, "--kubeconfig=") {
			out[i] = "--kubeconfig=" + path
		}
	}
	return out
}
