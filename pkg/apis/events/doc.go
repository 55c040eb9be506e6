// Package events registers the events.k8s.io group. It has no internal type
// of its own: like kube-apiserver, it registers core.Event under
// events.k8s.io/__internal so that one Store serves both groups.
package events
