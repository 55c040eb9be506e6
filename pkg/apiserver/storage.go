package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
)

// NewStorageFactory lays Events out in etcd exactly as kube-apiserver does:
// /registry/events/<namespace>/<name>, encoded as core/v1 for both groups,
// so the two servers can share one events etcd.
func NewStorageFactory(storageConfig storagebackend.Config, storageMediaType string) *serverstorage.DefaultStorageFactory {
	encoding := serverstorage.NewDefaultResourceEncodingConfig(Scheme)
	encoding.SetResourceEncoding(core.Resource("events"), corev1.SchemeGroupVersion, core.SchemeGroupVersion)

	enabled := serverstorage.NewResourceConfig()
	enabled.EnableVersions(corev1.SchemeGroupVersion, eventsv1.SchemeGroupVersion)

	factory := serverstorage.NewDefaultStorageFactory(storageConfig, storageMediaType, Codecs, encoding, enabled, nil)
	// events.k8s.io Events are core Events in storage.
	factory.AddCohabitatingResources(core.Resource("events"), events.Resource("events"))
	return factory
}
