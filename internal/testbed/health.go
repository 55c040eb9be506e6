package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// readyInterval is how often starters poll for readiness: short, because
// the load tool reports the time from process start to the first /readyz
// 200.
const readyInterval = 50 * time.Millisecond

// logTailLines is how many lines of a child's log an error carries.
const logTailLines = 60

// EtcdHealth is nil when the etcd member at clientURL answers GET /health
// with {"health":"true"}: it has a leader and can serve a linearizable read.
func EtcdHealth(client *http.Client, clientURL string) error {
	resp, err := client.Get(clientURL + "/health")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var h struct {
		Health string `json:"health"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Health != "true" {
		return fmt.Errorf("/health: %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// WaitReadyz polls GET /readyz of the API server p runs until it answers
// 200, p exits or ctx ends, and returns the time from p's start to that
// 200. config is asked again until it succeeds: a server writes the
// kubeconfig it is reached with only as it starts. On failure the error
// ends with the tail of p's log.
func WaitReadyz(ctx context.Context, p *Process, config func() (*rest.Config, error)) (time.Duration, error) {
	var client *http.Client
	var host string
	err := p.Poll(ctx, readyInterval, func() error {
		if client == nil {
			c, err := config()
			if err != nil {
				return err
			}
			if client, err = httpClientFor(c); err != nil {
				return err
			}
			host = c.Host
		}
		return getOK(ctx, client, host+"/readyz?verbose")
	})
	if err != nil {
		return 0, fmt.Errorf("%s not ready: %w\n%s", p.Name, err, p.Tail(logTailLines))
	}
	return time.Since(p.StartedAt()), nil
}

// getOK is nil when GET url answers 200.
func getOK(ctx context.Context, client *http.Client, url string) error {
	body, err := Get(ctx, client, url)
	if err != nil {
		return err
	}
	// Read to the end so that the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 16<<10))
	return body.Close()
}

// Get is the body of GET url's 200 answer, for the caller to close. Any
// other status is an error carrying the start of the body (a Status, or
// /readyz's list of failed checks).
func Get(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
		return nil, fmt.Errorf("GET %s: %d %s", req.URL.RequestURI(), resp.StatusCode, bytes.TrimSpace(body))
	}
	return resp.Body, nil
}

// httpClientFor is a plain HTTP client with the rest.Config's TLS settings
// and credentials, for the health endpoints.
func httpClientFor(config *rest.Config) (*http.Client, error) {
	rt, err := rest.TransportFor(config)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: 5 * time.Second}, nil
}
