//go:build tools

// Package tools pins the collector builder in go.mod.
package tools

import _ "go.opentelemetry.io/collector/cmd/builder"
