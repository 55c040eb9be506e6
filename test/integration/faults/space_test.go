package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestExternalEtcdFullSaysWhatToDo fills an external etcd's 16 MiB quota.
// The server cannot fix someone else's etcd, so it answers writes 503,
// fails its /readyz check etcd-space and logs what the operator must do;
// once the operator has compacted, defragmented and disarmed, the check
// passes and writes are accepted again.
func TestExternalEtcdFullSaysWhatToDo(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcd(t, framework.WithEtcdFlags(fmt.Sprintf("--quota-backend-bytes=%d", 16<<20)))
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		EventTTL:    5 * time.Second,
		ExtraArgs:   []string{"--event-rate-limit-bytes-qps=0"},
	})
	client := framework.AdminRawClient(t, server)
	post := framework.Poster(t, client)
	accepted, refusal := framework.FillUntilRefused(t, post)
	if refusal == nil || refusal.Code != http.StatusServiceUnavailable {
		t.Fatalf("after %d accepted, want a 503 refusal, got %+v", accepted, refusal)
	}
	readyz := func() framework.Response { return client.Do(t, http.MethodGet, "/readyz?verbose", nil, nil) }
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			r := readyz()
			return r.Code != http.StatusOK && strings.Contains(string(r.Body), "[-]etcd-space failed"), nil
		})
	if err != nil {
		t.Fatalf("/readyz does not fail etcd-space while etcd is full: %s", readyz().Body)
	}
	if !server.LogContains("etcdctl alarm disarm") {
		t.Errorf("the log does not say what to do")
	}

	// The operator's recovery, after the Events have expired.
	ec := etcd.Client(t)
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true,
		func(ctx context.Context) (bool, error) {
			status, err := ec.Status(ctx, etcd.ClientURL())
			if err != nil {
				return false, nil
			}
			if _, err := ec.Compact(ctx, status.Header.Revision); err != nil && !strings.Contains(err.Error(), "compacted") {
				return false, nil
			}
			if _, err := ec.Defragment(ctx, etcd.ClientURL()); err != nil {
				return false, nil
			}
			if status, err = ec.Status(ctx, etcd.ClientURL()); err != nil || status.DbSize > 8<<20 {
				return false, nil
			}
			_, err = ec.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: status.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE})
			return err == nil, nil
		})
	if err != nil {
		t.Fatalf("cannot recover etcd as an operator would: %v", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return readyz().Code == http.StatusOK, nil })
	if err != nil {
		t.Fatalf("/readyz still failing after recovery: %s", readyz().Body)
	}
	if r := post(framework.UniqueName("after"), "small"); r.Code != http.StatusCreated {
		t.Errorf("write after recovery: %d %s", r.Code, r.Body)
	}
}
