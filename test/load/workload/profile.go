package workload

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// CPUProfile fetches a CPU profile of d from the server's
// /debug/pprof/profile (--profiling) into path. Run it beside a workload.
func CPUProfile(ctx context.Context, t Target, d time.Duration, path string) error {
	return save(ctx, t, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d/time.Second))), path)
}

// HeapProfile writes the server's heap profile, after a full GC, to path.
func HeapProfile(ctx context.Context, t Target, path string) error {
	return save(ctx, t, "/debug/pprof/heap?gc=1", path)
}

// save writes the body of a GET of urlPath from the server to the file path.
func save(ctx context.Context, t Target, urlPath, path string) error {
	body, err := get(ctx, t.Config, urlPath)
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
