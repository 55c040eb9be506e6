package workload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"k8s.io/client-go/rest"
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
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
