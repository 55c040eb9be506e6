package workload

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// CPUProfile fetches a CPU profile of d from the server's
// /debug/pprof/profile (--profiling) into path. Run it beside a workload.
func CPUProfile(ctx context.Context, t Target, d time.Duration, path string) error {
	c := rest.CopyConfig(t.Config)
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", c.Host, max(1, int(d/time.Second)))
	body, err := testbed.Get(ctx, client, url)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// HeapProfile writes the server's heap profile, after a full GC, to path.
func HeapProfile(ctx context.Context, t Target, path string) error {
	body, err := get(ctx, t.Config, "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
