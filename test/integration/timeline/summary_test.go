package timeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineSummary runs `kubectl timeline summary` against a real server
// with history: its counts per reason agree with counting the namespace's
// records listed one by one, the table draws a bar per reason, and -A
// counts the other namespace's records too.
func TestTimelineSummary(t *testing.T) {
	t.Parallel()
	plugin := timelineBinary(t)
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{"--history-batch-interval=50ms"}})
	client := server.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, otherNS := framework.UniqueName("summary"), framework.UniqueName("summary-other")
	now := time.Now().Truncate(time.Second)
	versions := 0
	for i, reason := range []string{"BackOff", "BackOff", "Pulled", "BackOff", "FailedMount", "Pulled"} {
		e := timelineEvent(fmt.Sprint("ev-", i), "Pod", fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i)),
			reason, corev1.EventTypeWarning, "kubelet", now.Add(-time.Duration(i)*time.Hour))
		e.InvolvedObject.Namespace = ns
		e, err := client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions++
		// A repeat is a new version (a PATCH of count, as tools/record
		// sends one), and counted as one.
		if reason == "BackOff" {
			e.Count, e.LastTimestamp = 2, metav1.NewTime(now.Add(-time.Duration(i)*time.Hour+time.Minute))
			if _, err := client.CoreV1().Events(ns).Update(ctx, e, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			versions++
		}
	}
	other := timelineEvent("ev-other", "Pod", "p", "uid-other", "Evicted", corev1.EventTypeWarning, "kubelet", now)
	other.InvolvedObject.Namespace = otherNS
	if _, err := client.CoreV1().Events(otherNS).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := framework.AdminRawClient(t, server)
	want := map[string]int64{}
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		records := framework.ListAllEventRecords(t, c, ns, "", 0)
		clear(want)
		for _, r := range records {
			want[r.Event.Reason]++
		}
		return len(records) == versions && len(framework.ListAllEventRecords(t, c, otherNS, "", 0)) == 1, nil
	})
	if err != nil {
		t.Fatalf("history never held the %d versions: %v", versions, err)
	}

	stdout, stderr, err := framework.KubectlAt(t, plugin, server.Kubeconfig, nil, "summary", "-n", ns, "--since=24h", "-o", "json")
	if err != nil {
		t.Fatalf("summary -o json: %v\n%s", err, stderr)
	}
	var count historyv1alpha1.EventRecordCount
	if err := json.Unmarshal([]byte(stdout), &count); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	got := map[string]int64{}
	for _, g := range count.Status.Groups {
		got[g.Values[0]] = g.Total
	}
	// ev-0's repeat is a minute ahead of now, so the last hour may be
	// one after until's.
	var inBuckets int64
	for _, b := range count.Status.Buckets {
		for _, n := range b.Counts {
			inBuckets += n
		}
	}
	if n := len(count.Status.Buckets); count.Kind != "EventRecordCount" || fmt.Sprint(got) != fmt.Sprint(want) || count.Status.Total != int64(versions) ||
		inBuckets != int64(versions) || n != 25 && n != 26 {
		t.Errorf("summary -o json: %s %v, total %d, %d in %d buckets; want %v, total %d, in 25 or 26 hourly buckets",
			count.Kind, got, count.Status.Total, inBuckets, n, want, versions)
	}

	stdout, stderr, err = framework.KubectlAt(t, plugin, server.Kubeconfig, nil, "summary", "-n", ns, "--since=24h")
	if err != nil {
		t.Fatalf("summary: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "REASON") || !strings.HasPrefix(lines[1], "BackOff") ||
		!strings.Contains(lines[1], strings.Repeat("█", 40)) || !strings.Contains(lines[3], "FailedMount") {
		t.Errorf("summary's table:\n%s", stdout)
	}

	stdout, stderr, err = framework.KubectlAt(t, plugin, server.Kubeconfig, nil, "summary", "-A", "--by=metadata.namespace", "--field-selector=reason=Evicted", "-o", "json")
	if err != nil {
		t.Fatalf("summary -A: %v\n%s", err, stderr)
	}
	var all historyv1alpha1.ClusterEventRecordCount
	if err := json.Unmarshal([]byte(stdout), &all); err != nil {
		t.Fatal(err)
	}
	if all.Kind != "ClusterEventRecordCount" || len(all.Status.Groups) != 1 || all.Status.Groups[0].Values[0] != otherNS || all.Status.Groups[0].Total != 1 {
		t.Errorf("summary -A by namespace of Evicted: %s %+v", all.Kind, all.Status.Groups)
	}
}
