// Package conversion groups the conversions between the internal Event
// (pkg/apis/core) and the two external versions served: core/v1 in
// pkg/conversion/corev1 and events.k8s.io/v1 in pkg/conversion/eventsv1.
package conversion
