//go:build tools

package hack

import (
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/apiserver/pkg/server"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/cli"
	_ "k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
)
