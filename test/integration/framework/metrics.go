package framework

// Reading a server's /metrics.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// MetricValue scrapes /metrics and sums the samples of name whose labels
// include labels.
func MetricValue(t *testing.T, config *rest.Config, name string, labels map[string]string) float64 {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, config.Host+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		space := strings.LastIndexByte(line, ' ')
		matches := true
		for k, v := range labels {
			if !strings.Contains(line[:space], fmt.Sprintf("%s=%q", k, v)) {
				matches = false
			}
		}
		if !matches {
			continue
		}
		v, err := strconv.ParseFloat(line[space+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// MetricLines is the text of the metric's samples that contain match.
func MetricLines(t *testing.T, config *rest.Config, name, match string) string {
	t.Helper()
	client, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(config.Host + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, match) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
