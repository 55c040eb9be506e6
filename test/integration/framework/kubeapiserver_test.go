package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeAPIServer starts kube-apiserver v1.36.3 with core/v1 Events kept in
// a second etcd (--etcd-servers-overrides), as the aggregated mode runs it,
// and checks that a namespace and an Event can be created through client-go
// with the admin token, that the Event lands in the events etcd, that the
// front-proxy settings are published, that kubectl works with the generated
// kubeconfig, and that Restart keeps the data.
func TestKubeAPIServer(t *testing.T) {
	t.Parallel()
	mainEtcd := StartEtcd(t)
	eventsEtcd := StartEtcd(t)
	s := StartKubeAPIServer(t, KubeAPIServerOptions{
		EtcdServers:          mainEtcd.ClientURL(),
		EtcdServersOverrides: "/events#" + eventsEtcd.ClientURL(),
	})
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	info, err := c.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != KubeVersion {
		t.Fatalf("server version %q, want %q", info.GitVersion, KubeVersion)
	}

	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fw-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "pod-a.1", Namespace: ns.Name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns.Name, Name: "pod-a", APIVersion: "v1"},
		Reason:         "Started",
		Message:        "Started container a",
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		Count:          1,
		FirstTimestamp: metav1.Now(),
		LastTimestamp:  metav1.Now(),
	}
	created, err := c.CoreV1().Events(ns.Name).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.CoreV1().Events(ns.Name).Get(ctx, ev.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.Reason != "Started" {
		t.Fatalf("got %+v", got)
	}

	// The Event is stored in the events etcd, core/v1 protobuf, not in the main one.
	key := fmt.Sprintf("/registry/events/%s/%s", ns.Name, ev.Name)
	resp, err := eventsEtcd.Client(t).Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || !bytes.HasPrefix(resp.Kvs[0].Value, []byte("k8s\x00")) {
		t.Fatalf("events etcd %s: %d keys (want 1, protobuf)", key, len(resp.Kvs))
	}
	if resp.Kvs[0].Lease == 0 {
		t.Errorf("event %s stored without a lease (TTL)", key)
	}
	resp, err = mainEtcd.Client(t).Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("event %s also in the main etcd", key)
	}

	// Front-proxy settings published for aggregated servers.
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["requestheader-allowed-names"], FrontProxyClientName) ||
		cm.Data["requestheader-client-ca-file"] == "" || cm.Data["client-ca-file"] == "" {
		t.Fatalf("extension-apiserver-authentication: %v", cm.Data)
	}

	// kubectl with the generated kubeconfig.
	t.Run("kubectl", func(t *testing.T) {
		kubectl := KubectlBinary(t)
		out, err := exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath, "get", "events", "-n", ns.Name, "-o", "name").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl: %v\n%s", err, out)
		}
		if strings.TrimSpace(string(out)) != "event/"+ev.Name {
			t.Fatalf("kubectl get events: %q", out)
		}
		out, err = exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "Server Version: "+KubeVersion) {
			t.Fatalf("kubectl version: %s", out)
		}
	})

	// Restart: same port and credentials, data kept.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Events(ns.Name).Get(ctx, ev.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// With no etcd given, StartKubeAPIServer brings its own.
func TestKubeAPIServerOwnEtcd(t *testing.T) {
	t.Parallel()
	s := StartKubeAPIServer(t, KubeAPIServerOptions{AuthorizationMode: "Node,RBAC"})
	if s.Etcd == nil || s.EtcdServers != s.Etcd.ClientURL() {
		t.Fatalf("etcd: %v %q", s.Etcd, s.EtcdServers)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.Client(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "own"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Events("own").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "own", Name: "p"},
		Reason:         "Test",
		Type:           corev1.EventTypeWarning,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
