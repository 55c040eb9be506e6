package storm

import (
	"crypto/sha256"
	"strings"
	"testing"
)

// TestHashKey: the keys are those of SHA-256 over each part followed by a
// zero byte, whatever the parts' lengths (the stack buffer's size included),
// so a key never changes with how it is computed.
func TestHashKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
	}{
		{name: "none"},
		{name: "one empty", parts: []string{""}},
		{name: "user", parts: []string{"user-budget", "system:node:node-1"}},
		{name: "reporter", parts: []string{"kubelet", "node-1", "system:node:node-1"}},
		{name: "parts that fill the buffer", parts: []string{strings.Repeat("a", 127), strings.Repeat("b", 127)}},
		{name: "parts past the buffer", parts: []string{strings.Repeat("a", 300), "b", strings.Repeat("c", 1000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sha256.New()
			for _, p := range tc.parts {
				h.Write([]byte(p))
				h.Write([]byte{0})
			}
			want := string(h.Sum(nil)[:keySize])
			if got := hashKey(tc.parts...); got != want {
				t.Errorf("hashKey(%q) = %x, want %x", tc.parts, got, want)
			}
		})
	}
}
