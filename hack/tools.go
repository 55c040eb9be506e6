//go:build tools

// Package hack pins the code generators in go.mod so that
// hack/update-codegen.sh runs the version the project was generated with.
package hack

import _ "k8s.io/code-generator"
