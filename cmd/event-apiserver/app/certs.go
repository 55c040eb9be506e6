package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
)

// serviceAccountNamespace is where a pod learns its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newCertsCommand makes certificates that other components need, as
// Secrets, with the same image, so that nothing is made by hand.
func newCertsCommand() *cobra.Command {
	certs := &cobra.Command{
		Use:   "certs",
		Short: "Create the certificates the deployment needs, as Secrets",
		Args:  cobra.NoArgs,
	}
	e := servingcert.EtcdCerts{
		Service:       "events-etcd",
		ClientService: "events-etcd-client",
		Prefix:        "events-etcd",
		CAValidity:    servingcert.DefaultCAValidity,
		Validity:      5 * servingcert.DefaultValidity,
	}
	var kubeconfig string
	var timeout time.Duration
	etcd := &cobra.Command{
		Use:   "etcd",
		Short: "Create the events etcd's CA, server, peer and client certificate Secrets where missing",
		Long: "Creates <prefix>-ca, <prefix>-server, <prefix>-peer and <prefix>-client in --namespace when " +
			"they are missing, all signed by the CA in <prefix>-ca. Existing Secrets are left as they are, " +
			"so running it again changes nothing.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.Namespace == "" {
				ns, err := os.ReadFile(serviceAccountNamespace)
				if err != nil {
					return fmt.Errorf("--namespace not given and not running in a pod: %w", err)
				}
				e.Namespace = strings.TrimSpace(string(ns))
			}
			config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(config)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return e.Ensure(ctx, client, time.Now())
		},
	}
	fs := etcd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of kube-apiserver; in a pod, the in-cluster configuration.")
	fs.StringVar(&e.Namespace, "namespace", "", "Namespace of the Secrets and Services; in a pod, the pod's.")
	fs.StringVar(&e.Service, "service", e.Service, "Headless Service of the etcd StatefulSet (members are <pod>.<service>.<namespace>.svc).")
	fs.StringVar(&e.ClientService, "client-service", e.ClientService, "Service clients reach etcd through.")
	fs.StringVar(&e.Prefix, "secret-prefix", e.Prefix, "Secrets are <prefix>-ca, -server, -peer and -client.")
	fs.StringSliceVar(&e.ExtraSANs, "extra-sans", nil, "More DNS names or IPs for the server certificate, e.g. the address kube-apiserver uses.")
	fs.DurationVar(&e.CAValidity, "ca-validity", e.CAValidity, "Lifetime of the CA.")
	fs.DurationVar(&e.Validity, "validity", e.Validity, "Lifetime of the server, peer and client certificates.")
	fs.DurationVar(&timeout, "timeout", time.Minute, "Give up after this long.")
	certs.AddCommand(etcd)
	return certs
}
