package app

import (
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
)

// The history-only server (--history-only) serves history.eventapiserver.io
// alone, behind its own APIService, and captures Events through
// kube-apiserver's API. It needs what every conformant cluster offers,
// managed ones included: the aggregation layer, TokenReview and
// SubjectAccessReview (delegated as with --aggregated), and RBAC to list and
// watch Events. It has no Events storage, no etcd, no admission (it takes no
// writes) and no priority and fairness (whose configuration would need more
// RBAC); the max-in-flight limits apply. The flags of what it lacks are
// refused (modes.go).

// historyOnlyConfig finishes the configuration of a history-only server:
// the delegation of --aggregated, none of its admission; its capture
// counts the Events it reads in events.
func (c *completedOptions) historyOnlyConfig(serverConfig *genericapiserver.RecommendedConfig, events *eventmetrics.Counter) (*apiserver.Config, error) {
	if err := c.Aggregated.applyDelegationTo(serverConfig); err != nil {
		return nil, err
	}
	features := *c.Features
	features.EnablePriorityAndFairness = false
	if err := features.ApplyTo(&serverConfig.Config, nil, nil); err != nil {
		return nil, err
	}
	history, err := c.History.KubeConfig(c.DataDir, serverConfig.ClientConfig, events)
	if err != nil {
		return nil, err
	}
	return &apiserver.Config{
		GenericConfig: serverConfig,
		ExtraConfig:   apiserver.ExtraConfig{TTL: c.ttl, History: history, Mode: c.mode},
	}, nil
}
