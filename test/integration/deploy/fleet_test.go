package deploy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// fleetNamespace is where a fleet's hub, as deploy/ installs it, reads its
// member clusters' kubeconfig Secrets.
const fleetNamespace = "event-history-fleet"

// TestFleetHubRBAC applies what overlays/fleet-hub and the chart with
// fleet.enabled=true render, for real, to a kube-apiserver v1.36.3, one
// after the other, and asks it with `kubectl auth can-i` what the hub's
// ServiceAccount may do with Secrets: get, list and watch in the fleet's
// namespace, where the server runs as a hub (--history-fleet-namespace,
// on PostgreSQL), and nothing more anywhere else than history-only itself
// has (its serving certificate's Secret).
func TestFleetHubRBAC(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	kubectl := func(args ...string) (string, error) {
		t.Helper()
		stdout, stderr, err := framework.KubectlAt(t, framework.KubectlBinary(t), kube.KubeconfigPath, nil, args...)
		return strings.TrimSpace(stdout + stderr), err
	}
	// What the overlay's own Namespace object makes, and the chart's docs
	// create first (helm install --create-namespace, kubectl create namespace).
	for _, ns := range []string{deployNamespace, fleetNamespace} {
		if _, err := kube.Client(t).CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hub := "system:serviceaccount:" + deployNamespace + ":event-apiserver"
	for _, install := range []struct {
		name   string
		render func(t *testing.T) []byte
	}{
		{"overlays/fleet-hub", func(t *testing.T) []byte { return framework.RenderOverlay(t, "overlays/fleet-hub") }},
		{"chart", func(t *testing.T) []byte {
			return renderChart(t, deployNamespace, "history.store=postgres", "fleet.enabled=true")
		}},
	} {
		t.Run(install.name, func(t *testing.T) {
			rendered := install.render(t)
			objs := framework.SplitManifests(t, rendered)
			deploy := &appsv1.Deployment{}
			framework.FromUnstructured(t, framework.FindObject(t, objs, "Deployment", "event-apiserver"), deploy)
			args := strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " ")
			for _, want := range []string{"--history-only", "--history-store=postgres", "--history-fleet-namespace=" + fleetNamespace} {
				if !strings.Contains(args, want) {
					t.Errorf("the hub runs without %s: %s", want, args)
				}
			}
			// The namespaces stay: without a namespace controller a deleted
			// one never goes, and the next install needs them.
			list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{}}
			for _, o := range objs {
				if o.GetKind() != "Namespace" {
					list["items"] = append(list["items"].([]any), o.Object)
				}
			}
			data, err := json.Marshal(list)
			if err != nil {
				t.Fatal(err)
			}
			path := framework.WriteFile(t, strings.ReplaceAll(install.name, "/", "-")+".json", string(data))
			if out, err := kubectl("apply", "-f", path); err != nil {
				t.Fatalf("kubectl apply: %v\n%s", err, out)
			}
			// The next install starts from nothing of this one's RBAC.
			defer func() {
				if out, err := kubectl("delete", "-f", path, "--wait"); err != nil {
					t.Errorf("kubectl delete: %v\n%s", err, out)
				}
			}()
			for _, c := range []struct {
				verb, where string
				want        string
			}{
				{"get", "-n=" + fleetNamespace, "yes"},
				{"list", "-n=" + fleetNamespace, "yes"},
				{"watch", "-n=" + fleetNamespace, "yes"},
				{"create", "-n=" + fleetNamespace, "no"},
				{"delete", "-n=" + fleetNamespace, "no"},
				{"list", "-n=" + deployNamespace, "no"},
				{"list", "-n=kube-system", "no"},
				{"get", "-n=default", "no"},
				{"list", "--all-namespaces", "no"},
				{"watch", "--all-namespaces", "no"},
			} {
				// can-i exits 1 for "no"; its answer is what counts.
				got, _ := kubectl("auth", "can-i", c.verb, "secrets", c.where, "--as="+hub)
				if got != c.want {
					t.Errorf("can the hub %s secrets %s? %q, want %s", c.verb, c.where, got, c.want)
				}
			}
		})
	}
}
