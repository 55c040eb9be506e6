package proc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

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
