//go:build tools

// Package tools records helm's command as an import so that `go mod tidy`
// keeps its requirements in go.mod/go.sum.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
