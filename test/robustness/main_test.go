// Package robustness runs Kubernetes-like Event traffic against event-apiserver
// replicas over a three-member etcd while injecting faults on a seeded
// schedule, records every operation, every watch event and etcd's own
// revision history, and holds the record to the guarantees clients build
// caches on (package checker). It is issue 40: etcd's robustness tests
// (tests/robustness) one layer up, through the watch cache, the resume from
// etcd history, and across replicas.
//
// The short run is in the integration tier; hack/robustness.sh runs a long
// one:
//
//	go test ./test/robustness -run TestRobustness -v -args -seed=N -robustness-duration=30m
package robustness

import (
	"flag"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

var (
	seedFlag     = flag.Int64("seed", 0, "the run's seed; 0 picks one from the clock (printed)")
	durationFlag = flag.Duration("robustness-duration", 75*time.Second, "how long traffic and faults run")
	writersFlag  = flag.Int("writers", 3, "concurrent writers, each about 8 writes a second")
	faultsFlag   = flag.String("faults", "", "comma-separated fault kinds to pick from (default: all)")
	// More informers on all namespaces cost the servers little beside the
	// writes (a watch event is encoded once per watcher), so they are how a
	// long run on a small machine checks many watch events.
	watchersFlag = flag.Int("extra-watchers", 0, "informer-style watchers on all namespaces, beside the four every run has")
)

func TestMain(m *testing.M) { framework.Main(m) }
