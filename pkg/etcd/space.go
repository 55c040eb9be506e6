package etcd

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

const (
	// DefaultQuotaBackendBytes is etcd's own default quota, 2 GiB.
	DefaultQuotaBackendBytes = 2 << 30
	// defaultReclaimInterval is how often the NOSPACE alarm is checked.
	defaultReclaimInterval = 10 * time.Second
	// disarmBelow is the share of the quota the database must be under,
	// after compaction and defragmentation, before writes are let in
	// again: disarming at 99% would only raise the alarm again at once.
	disarmBelow = 0.8
)

// reclaimSpace keeps the embedded etcd writable by itself. When its
// database outgrows the quota, etcd raises the NOSPACE alarm and refuses
// every write until an operator compacts, defragments and disarms; the
// expired Events free the space, but etcd does not give it back. Nobody
// else operates an embedded etcd, so the server does what the etcd
// maintenance guide tells the operator to do
// (https://etcd.io/docs/v3.6/op-guide/maintenance/#space-quota), once the
// space is free: compact to the current revision (the API server's own
// compaction runs only every 5 minutes), defragment, and disarm when the
// database is under disarmBelow of the quota.
func (e *Embedded) reclaimSpace(ctx context.Context, quota int64, interval time.Duration) {
	// A client over the network listener: etcd's in-process client
	// (v3client) cannot defragment.
	endpoint := e.ClientURL()
	client, err := etcdclient.New(storagebackend.TransportConfig{ServerList: []string{endpoint}},
		etcdclient.WithDialTimeout(5*time.Second))
	if err != nil {
		klog.ErrorS(err, "Cannot watch the embedded etcd's space; if it fills up, Event writes stay refused")
		return
	}
	defer func() { _ = client.Close() }()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := reclaimOnce(ctx, client, endpoint, quota); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Cannot reclaim the embedded etcd's space yet; Event writes stay refused")
		}
	}
}

// reclaimOnce does one round: nothing unless the NOSPACE alarm is raised.
func reclaimOnce(ctx context.Context, client *clientv3.Client, endpoint string, quota int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	alarms, err := client.AlarmList(ctx)
	if err != nil {
		return err
	}
	var nospace *pb.AlarmMember
	for _, a := range alarms.Alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			nospace = a
		}
	}
	if nospace == nil {
		return nil
	}
	status, err := client.Status(ctx, endpoint)
	if err != nil {
		return err
	}
	if _, err := client.Compact(ctx, status.Header.Revision, clientv3.WithCompactPhysical()); err != nil &&
		!errors.Is(err, rpctypes.ErrCompacted) {
		return err
	}
	if _, err := client.Defragment(ctx, endpoint); err != nil {
		return err
	}
	if status, err = client.Status(ctx, endpoint); err != nil {
		return err
	}
	if float64(status.DbSize) >= disarmBelow*float64(quota) {
		klog.InfoS("Embedded etcd still over its space budget after compaction and defragmentation, waiting for Events to expire",
			"dbSizeBytes", status.DbSize, "quotaBytes", quota)
		return nil
	}
	if _, err := client.AlarmDisarm(ctx, (*clientv3.AlarmMember)(nospace)); err != nil {
		return err
	}
	klog.InfoS("Embedded etcd has space again, NOSPACE alarm disarmed; Event writes accepted",
		"dbSizeBytes", status.DbSize, "quotaBytes", quota)
	return nil
}
