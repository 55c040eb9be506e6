package aggregated

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestKubeAPIServerLivenessWithOverrideDown records what docs/aggregated.md
// tells kube-apiserver's operators: with --etcd-servers-overrides=/events#...
// and that etcd down, kube-apiserver v1.36.3's /livez fails on the check
// etcd-override-0 (so kubeadm's liveness probe on /livez restarts it in a
// loop) and /readyz on etcd-override-readiness-0, while
// /livez?exclude=etcd-override-0 and
// /readyz?exclude=etcd-override-0&exclude=etcd-override-readiness-0 pass; kube-apiserver's own etcd
// check keeps counting; all pass again when the events etcd returns.
func TestKubeAPIServerLivenessWithOverrideDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	events := framework.StartEtcd(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		EtcdServersOverrides: "/events#" + events.ClientURL(),
	})
	rc := kube.Client(t).Discovery().RESTClient()
	get := func(pathAndQuery string) (int, string) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		path, query, _ := strings.Cut(pathAndQuery, "?")
		req := rc.Get().AbsPath(path).Param("verbose", "")
		values, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		for _, exclude := range values["exclude"] {
			req = req.Param("exclude", exclude)
		}
		var code int
		body, _ := req.Do(ctx).StatusCode(&code).Raw()
		return code, string(body)
	}
	for _, path := range []string{"/livez", "/readyz"} {
		if code, body := get(path); code != http.StatusOK {
			t.Fatalf("%s before the outage: %d\n%s", path, code, body)
		}
	}
	if err := events.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var body string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var code int
		code, body = get("/livez")
		return code != http.StatusOK && strings.Contains(body, "[-]etcd-override-0 failed"), nil
	})
	if err != nil {
		t.Fatalf("/livez does not fail on etcd-override-0 with the events etcd down: %v\n%s", err, body)
	}
	t.Logf("/livez failed on etcd-override-0 %v after the events etcd stopped:\n%s", time.Since(stopped).Round(time.Millisecond), body)
	if !strings.Contains(body, "[+]etcd ok") {
		t.Errorf("/livez should still pass its main etcd check:\n%s", body)
	}
	for path, want := range map[string]int{
		"/readyz":                        http.StatusInternalServerError,
		"/livez?exclude=etcd-override-0": http.StatusOK,
		"/readyz?exclude=etcd-override-readiness-0": http.StatusInternalServerError,
		// etcd-override-0 is in /readyz too, as etcd is.
		"/readyz?exclude=etcd-override-0&exclude=etcd-override-readiness-0": http.StatusOK,
	} {
		code, body := get(path)
		t.Logf("%s: %d", path, code)
		if code != want {
			t.Errorf("%s with the events etcd down: %d, want %d\n%s", path, code, want, body)
		}
	}
	if err := events.Restart(); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		code, _ := get("/livez")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/livez not ok after the events etcd returned: %v", err)
	}
}
