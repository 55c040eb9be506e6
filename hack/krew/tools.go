//go:build tools

// Package tools records krew's commands as imports so that `go mod tidy`
// keeps their requirements in go.mod/go.sum.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
