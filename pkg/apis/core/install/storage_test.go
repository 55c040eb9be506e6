package install_test

import (
	"bytes"
	"testing"

	k8scorev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	serverstorage "k8s.io/apiserver/pkg/server/storage"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corev1 "github.com/eventapiserver/event-apiserver/pkg/apis/core/v1"
	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
)

// protobufPrefix starts every protobuf object kube-apiserver writes to etcd.
var protobufPrefix = []byte("k8s\x00")

// TestStorageEncoding checks the bytes written to etcd: core/v1 protobuf in
// the runtime.Unknown envelope, whichever group the Event came through, so
// kube-apiserver reads what we write and the reverse. The codec is built by
// the function kube-apiserver's storage factory uses.
func TestStorageEncoding(t *testing.T) {
	scheme, codecs := servedScheme()
	f := newFuzzer(t, codecs)

	storageCodec := func(memory schema.GroupVersion) runtime.Codec {
		codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
			StorageMediaType:  runtime.ContentTypeProtobuf,
			StorageSerializer: codecs,
			StorageVersion:    corev1.SchemeGroupVersion,
			MemoryVersion:     memory,
		})
		if err != nil {
			t.Fatal(err)
		}
		return codec
	}
	coreCodec := storageCodec(core.SchemeGroupVersion)
	eventsCodec := storageCodec(events.SchemeGroupVersion)

	tests := []struct {
		name  string
		codec runtime.Codec
		// other is the codec of the other group over the same etcd keys.
		other runtime.Codec
	}{
		{name: "core resource", codec: coreCodec, other: eventsCodec},
		{name: "events.k8s.io resource", codec: eventsCodec, other: coreCodec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < iterations; i++ {
				original := &core.Event{}
				f.Fill(original)

				data, err := runtime.Encode(tc.codec, original)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if !bytes.HasPrefix(data, protobufPrefix) {
					t.Fatalf("stored bytes start with %q, want %q", data[:min(len(data), 4)], protobufPrefix)
				}
				var envelope runtime.Unknown
				if err := envelope.Unmarshal(data[len(protobufPrefix):]); err != nil {
					t.Fatalf("unmarshal envelope: %v", err)
				}
				if envelope.APIVersion != "v1" || envelope.Kind != "Event" {
					t.Fatalf("envelope says apiVersion %q kind %q, want v1 Event", envelope.APIVersion, envelope.Kind)
				}
				// The payload is a plain k8s.io/api core/v1 Event, as
				// kube-apiserver writes it.
				var external k8scorev1.Event
				if err := external.Unmarshal(envelope.Raw); err != nil {
					t.Fatalf("unmarshal core/v1 Event: %v", err)
				}
				fromPayload := &core.Event{}
				if err := scheme.Convert(&external, fromPayload, nil); err != nil {
					t.Fatalf("convert payload: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(original, fromPayload) {
					t.Fatalf("payload differs (-original +payload):\n%s", diff.Diff(original, fromPayload))
				}

				decoded, err := runtime.Decode(tc.codec, data)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(original, decoded) {
					t.Fatalf("decoded object differs (-original +decoded):\n%s", diff.Diff(original, decoded))
				}

				otherData, err := runtime.Encode(tc.other, original)
				if err != nil {
					t.Fatalf("encode through the other group: %v", err)
				}
				if !bytes.Equal(data, otherData) {
					t.Fatalf("the two groups store different bytes for the same Event")
				}
				decodedByOther, err := runtime.Decode(tc.other, data)
				if err != nil {
					t.Fatalf("decode through the other group: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(original, decodedByOther) {
					t.Fatalf("other group decodes differently (-original +decoded):\n%s", diff.Diff(original, decodedByOther))
				}
			}
		})
	}
}
