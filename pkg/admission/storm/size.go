package storm

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corev1conv "github.com/eventapiserver/event-apiserver/pkg/apis/core/v1"
)

// DefaultMaxEventBytes bounds an Event as stored. kube-apiserver has no
// such limit: a core/v1 message is unbounded, so a big one passes
// validation and fails on its way into etcd, which the client sees as a 500
// ("etcdserver: request is too large" past etcd's --max-request-bytes of
// 1.5 MiB, "trying to send message larger than max" past the etcd client's
// 2 MiB). 1 MiB is more than anything kube's validation bounds (256 KiB of
// annotations, 1 KiB notes on events.k8s.io/v1) and leaves etcd's limit room
// for the key, the lease and the transaction.
const DefaultMaxEventBytes = 1 << 20

// storedSize is the size of the Event's core/v1 protobuf encoding, what
// etcd would hold (without the 4-byte "k8s\x00" envelope and type header).
func storedSize(event *core.Event) (int, error) {
	var stored corev1.Event
	if err := corev1conv.Convert_core_Event_To_v1_Event(event, &stored, nil); err != nil {
		return 0, err
	}
	return stored.Size(), nil
}

// checkSize returns the Event's stored size, and refuses an Event bigger
// than limit with 413, the code the generic server gives a request body over
// its limit.
func checkSize(event *core.Event, limit int64) (int, error) {
	size, err := storedSize(event)
	if err != nil {
		return 0, apierrors.NewInternalError(err)
	}
	if limit > 0 && int64(size) > limit {
		return size, apierrors.NewRequestEntityTooLargeError(
			fmt.Sprintf("Event %q is %d bytes when stored, the limit is %d bytes", event.Name, size, limit))
	}
	return size, nil
}
