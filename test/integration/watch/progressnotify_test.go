package watch

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestProgressNotifyWarning starts the server on an external etcd left at
// etcd's own progress-notify interval (10 minutes, i.e. none in practice):
// the server warns at start-up and names the etcd flag that fixes it. The
// opposite case, an etcd that sends them, is checked by
// TestWatchBookmarksResumeAfterRestart.
func TestProgressNotifyWarning(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcd(t, framework.WithEtcdProgressNotifyInterval(0))
	start := time.Now()
	server := framework.StartServer(t, framework.ServerOptions{EtcdServers: etcd.ClientURL()})
	const want = "Start etcd with --watch-progress-notify-interval=5s"
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 40*time.Second, true,
		func(context.Context) (bool, error) { return server.LogContains(want), nil })
	if err != nil {
		t.Fatalf("no start-up warning %q within 40s", want)
	}
	t.Logf("warned %v after start", time.Since(start).Round(time.Second))
	if server.LogContains("etcd sends watch progress notifications") {
		t.Error("the server also claims etcd sends progress notifications")
	}
}
