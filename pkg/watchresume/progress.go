package watchresume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

// ProgressCheckTimeout is how long WarnWithoutProgressNotify waits for a
// progress notification: a few recommended intervals, as etcd adds up to a
// tenth of jitter to each.
const ProgressCheckTimeout = 3 * etcd.DefaultProgressNotifyInterval

// errNoProgressNotify means etcd answered but sent no progress notification
// in time.
var errNoProgressNotify = errors.New("no watch progress notification")

// WarnWithoutProgressNotify logs a warning when the etcd behind config sends
// no watch progress notification within timeout. Without them the watch
// cache's resource version, and the bookmarks clients resume from, advance
// only when an Event changes or a consistent LIST makes the cacher ask etcd
// for progress (KEP-1904, KEP-2340), so a client that resumes after a quiet
// spell starts from an old revision. etcd's own default interval is 10
// minutes. It returns when the check is done or ctx ends.
func WarnWithoutProgressNotify(ctx context.Context, config storagebackend.TransportConfig, prefix string, timeout time.Duration) {
	servers := strings.Join(config.ServerList, ",")
	elapsed, err := CheckProgressNotify(ctx, config, prefix, timeout)
	switch {
	case err == nil:
		klog.InfoS("etcd sends watch progress notifications", "etcdServers", servers, "after", elapsed)
	case errors.Is(err, errNoProgressNotify):
		klog.Warningf("etcd at %s sent no watch progress notification within %s: the watch cache's resource version "+
			"and clients' bookmarks advance only when Events change or a consistent LIST asks etcd for progress. "+
			"Start etcd with --watch-progress-notify-interval=%s.", servers, timeout, etcd.DefaultProgressNotifyInterval)
	case ctx.Err() != nil:
	default:
		klog.ErrorS(err, "Cannot check whether etcd sends watch progress notifications", "etcdServers", servers)
	}
}

// CheckProgressNotify watches a key no one writes, asking for progress
// notifications, and reports how long the first one took. It fails with
// errNoProgressNotify when none comes within timeout.
func CheckProgressNotify(ctx context.Context, config storagebackend.TransportConfig, prefix string, timeout time.Duration) (time.Duration, error) {
	client, err := etcdclient.New(config, etcdclient.WithDialTimeout(10*time.Second))
	if err != nil {
		return 0, err
	}
	defer func() { _ = client.Close() }()

	// Make sure etcd answers at all before timing it.
	getCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := strings.TrimSuffix(prefix, "/") + "/event-apiserver/progress-notify-probe"
	if _, err := client.Get(getCtx, key); err != nil {
		return 0, fmt.Errorf("reading from etcd: %w", err)
	}

	watchCtx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), timeout)
	defer cancel()
	start := time.Now()
	for resp := range client.Watch(watchCtx, key, clientv3.WithProgressNotify()) {
		if err := resp.Err(); err != nil {
			return 0, err
		}
		if resp.IsProgressNotify() {
			return time.Since(start), nil
		}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return 0, errNoProgressNotify
}
