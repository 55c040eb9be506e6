package framework

// Filling an etcd's quota through the server with 600 KB Events, for the
// tests of what a full etcd does to writes.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Poster creates core/v1 Events in default with a given message.
func Poster(t *testing.T, client *RawClient) func(name, message string) Response {
	return func(name, message string) Response {
		return client.Send(t, Request{Method: http.MethodPost, Path: CoreEventsPath, ContentType: ContentJSON,
			Body: CoreBody(name, func(m map[string]any) { m["message"] = message })})
	}
}

// FillUntilRefused writes 600 KB Events from 4 writers until one is refused
// (at most 160, 96 MB), and returns how many were accepted and the first
// refusal, nil if none.
func FillUntilRefused(t *testing.T, post func(name, message string) Response) (int, *Response) {
	big := strings.Repeat("x", 600<<10)
	var (
		mu       sync.Mutex
		accepted int
		refusal  *Response
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				mu.Lock()
				done := refusal != nil
				mu.Unlock()
				if done {
					return
				}
				r := post(fmt.Sprintf("big-%d-%d", w, i), big)
				mu.Lock()
				switch {
				case r.Code == http.StatusCreated:
					accepted++
				case refusal == nil:
					refusal = &r
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return accepted, refusal
}
