package framework

// A kubelet-less runner for rendered manifests: it starts a pod's container
// as a process the way a kubelet would (command and args with $(VAR)
// expansion, env with fieldRef, resourceFieldRef, secretKeyRef and
// configMapKeyRef resolved, Secrets,
// ConfigMaps, emptyDirs and the ServiceAccount token mounted as files at
// their mount paths, the in-cluster environment), so that a test can prove
// the manifests work as applied without a node.
//
// Each container runs in a private mount namespace (unshare -m, so root is
// needed): a tmpfs on /run (and so /var/run) holds the mount points, every
// volume is bind-mounted at its mountPath, /etc/hosts is replaced to map
// cluster DNS names to loopback addresses (the one rewrite: there is no
// cluster DNS), and the root filesystem is remounted read-only when the
// container asks for it. The process runs as the container's runAsUser with
// no_new_privs and an empty capability bounding set (setpriv). Not
// emulated: seccomp profiles, cgroups (resources are only read for env),
// network namespaces (pods get distinct 127.0.0.x addresses instead).

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// serviceAccountVolume is the projected volume a kubelet adds for the token.
const serviceAccountVolume = "kube-api-access"

// Kubelet runs pods against one kube-apiserver.
type Kubelet struct {
	t      testing.TB
	kube   *KubeAPIServer
	client kubernetes.Interface
	// binaries maps a container's command[0] to the program on this machine.
	binaries  map[string]string
	hostsFile string
	dir       string
}

// WriteHostsFile writes an /etc/hosts that maps each name to its IP (one
// line per name and IP, so a name may have several) for NewKubelet and
// KubeAPIServerOptions.HostsFile.
func WriteHostsFile(t testing.TB, hosts map[string][]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	names := make([]string, 0, len(hosts))
	for name := range hosts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, ip := range hosts[name] {
			fmt.Fprintf(&b, "%s %s\n", ip, name)
		}
	}
	path := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewKubelet returns a runner whose pods reach kube through the in-cluster
// configuration and resolve names with hostsFile (WriteHostsFile). binaries
// maps each container's command[0] (e.g. "/event-apiserver", "etcd") to a
// binary built here. It skips the test unless it runs as root with unshare
// and setpriv available.
func NewKubelet(t testing.TB, kube *KubeAPIServer, binaries map[string]string, hostsFile string) *Kubelet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the kubelet-less runner needs root for private mount namespaces")
	}
	for _, tool := range []string{"unshare", "setpriv", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the kubelet-less runner needs %s: %v", tool, err)
		}
	}
	return &Kubelet{t: t, kube: kube, client: kube.Client(t), binaries: binaries, hostsFile: hostsFile,
		dir: filepath.Join(t.TempDir(), "kubelet")}
}

// Pod is one running (or stopped) pod with a single container.
type Pod struct {
	Name, Namespace, IP string
	Spec                corev1.PodSpec
	proc                *testbed.Process
	volumes             map[string]string
	// owner is the uid and gid the volumes belong to (-1: unchanged).
	owner [2]int
}

// Replace stops the pod and starts its container again as a new pod from
// the same template would start, e.g. in a rollout restart: its emptyDirs
// start empty, claims and Secrets are kept, the address stays.
func (p *Pod) Replace() error {
	if err := p.proc.Stop(); err != nil {
		return err
	}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		dir := p.volumes[v.Name]
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Lchown(dir, p.owner[0], p.owner[1]); err != nil {
			return err
		}
	}
	return p.proc.Start()
}

// VolumeDir is where the runner keeps the named volume on this machine,
// e.g. to read what the container wrote to an emptyDir or a claim.
func (p *Pod) VolumeDir(name string) string { return p.volumes[name] }

// RunPod materialises the pod's volumes, then starts its only container.
// Secrets and ConfigMaps it mounts are waited for, as a kubelet waits.
func (k *Kubelet) RunPod(ctx context.Context, name, namespace, ip string, tmpl corev1.PodTemplateSpec) (*Pod, error) {
	spec := tmpl.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
		return nil, fmt.Errorf("pod %s: the runner supports exactly one container and no init containers", name)
	}
	c := spec.Containers[0]
	podDir := filepath.Join(k.dir, namespace, name)
	meta := tmpl.ObjectMeta
	meta.Name, meta.Namespace = name, namespace

	env, err := k.env(meta, spec, c, ip)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", name, err)
	}
	volumes, err := k.volumes(ctx, podDir, meta, spec)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", name, err)
	}
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("pod %s: container %s has no command; the runner does not read image entrypoints", name, c.Name)
	}
	bin, ok := k.binaries[c.Command[0]]
	if !ok {
		return nil, fmt.Errorf("pod %s: no binary for command %q", name, c.Command[0])
	}
	vars := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	argv := []string{bin}
	for _, a := range append(append([]string(nil), c.Command[1:]...), c.Args...) {
		argv = append(argv, expand(a, vars))
	}

	mounts := append([]corev1.VolumeMount(nil), c.VolumeMounts...)
	if _, ok := volumes[serviceAccountVolume]; ok {
		mounts = append(mounts, corev1.VolumeMount{Name: serviceAccountVolume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
	}
	var script strings.Builder
	script.WriteString("set -e\nmount -t tmpfs -o mode=755 tmpfs /run\n")
	fmt.Fprintf(&script, "mount --bind %s /etc/hosts\n", shellQuote(k.hostsFile))
	for _, m := range mounts {
		src, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("pod %s: volume %q is not defined", name, m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		target := path.Clean(m.MountPath)
		if strings.HasPrefix(target, "/var/run/") {
			target = "/run/" + strings.TrimPrefix(target, "/var/run/")
		}
		if !strings.HasPrefix(target, "/run/") {
			return nil, fmt.Errorf("pod %s: mount path %s: the runner mounts only under /run and /var/run, where it has a private tmpfs", name, m.MountPath)
		}
		fmt.Fprintf(&script, "mkdir -p %[1]s\nmount --bind %[2]s %[1]s\n", shellQuote(target), shellQuote(src))
		if m.ReadOnly {
			fmt.Fprintf(&script, "mount -o remount,bind,ro %s\n", shellQuote(target))
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		script.WriteString("mount -o remount,bind,ro /\n")
	}
	script.WriteString("exec env -i")
	for _, e := range env {
		script.WriteString(" " + shellQuote(e))
	}
	if uid, gid, ok := runAs(spec, c); ok {
		fmt.Fprintf(&script, " setpriv --reuid=%d --regid=%d --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all", uid, gid)
	}
	for _, a := range argv {
		script.WriteString(" " + shellQuote(a))
	}
	script.WriteString("\n")
	scriptPath := filepath.Join(podDir, "start.sh")
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o700); err != nil {
		return nil, err
	}
	p := &Pod{Name: name, Namespace: namespace, IP: ip, Spec: spec, volumes: volumes, owner: k.volumeOwner(spec)}
	p.proc = &testbed.Process{Name: "pod " + namespace + "/" + name, Path: "unshare",
		Args: []string{"--mount", "--propagation", "private", "sh", scriptPath}, LogPath: filepath.Join(podDir, "log")}
	stopAtCleanup(k.t, p.proc)
	if err := p.proc.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// env is the container's environment as a kubelet sets it: the in-cluster
// service variables, then the container's env in order, each value
// expanded against those before it.
func (k *Kubelet) env(meta metav1.ObjectMeta, spec corev1.PodSpec, c corev1.Container, ip string) ([]string, error) {
	vars := map[string]string{
		"KUBERNETES_SERVICE_HOST": "127.0.0.1",
		"KUBERNETES_SERVICE_PORT": strconv.Itoa(k.kube.Port),
		"HOSTNAME":                meta.Name,
		"PATH":                    "/usr/local/bin:/usr/bin:/bin",
	}
	order := []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOSTNAME", "PATH"}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = meta.Name
			case "metadata.namespace":
				v = meta.Namespace
			case "status.podIP":
				v = ip
			case "spec.serviceAccountName":
				v = spec.ServiceAccountName
			default:
				return nil, fmt.Errorf("env %s: fieldRef %s not supported by the runner", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			var q resource.Quantity
			res, kind, _ := strings.Cut(r.Resource, ".")
			list := c.Resources.Limits
			if res == "requests" {
				list = c.Resources.Requests
			}
			q = list[corev1.ResourceName(kind)]
			divisor := r.Divisor
			if divisor.IsZero() {
				divisor = resource.MustParse("1")
			}
			// As the kubelet's ExtractContainerResourceValue: round up.
			v = strconv.FormatInt((q.Value()+divisor.Value()-1)/divisor.Value(), 10)
			if kind == "cpu" {
				v = strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			secret, err := k.waitSecret(context.Background(), meta.Namespace, ref.Name)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			data, ok := secret.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			v = string(data)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := k.client.CoreV1().ConfigMaps(meta.Namespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			data, ok := cm.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: configmap %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			v = data
		default:
			return nil, fmt.Errorf("env %s: only value, fieldRef, resourceFieldRef, secretKeyRef and configMapKeyRef are supported by the runner", e.Name)
		}
		if _, seen := vars[e.Name]; !seen {
			order = append(order, e.Name)
		}
		vars[e.Name] = v
	}
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+vars[name])
	}
	return env, nil
}

// volumes writes each volume to a directory and returns name -> directory,
// plus the ServiceAccount volume a kubelet adds unless automounting is off.
func (k *Kubelet) volumes(ctx context.Context, podDir string, meta metav1.ObjectMeta, spec corev1.PodSpec) (map[string]string, error) {
	owner := k.volumeOwner(spec)
	uid, gid := owner[0], owner[1]
	dirs := map[string]string{}
	for _, v := range spec.Volumes {
		dir := filepath.Join(podDir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		switch {
		case v.EmptyDir != nil, v.PersistentVolumeClaim != nil:
			// Both start empty here; a claim keeps its directory across
			// restarts of this pod.
		case v.Secret != nil:
			s, err := k.waitSecret(ctx, meta.Namespace, v.Secret.SecretName)
			if err != nil {
				return nil, err
			}
			files = s.Data
		case v.ConfigMap != nil:
			cm, err := k.client.CoreV1().ConfigMaps(meta.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			for key, val := range cm.Data {
				files[key] = []byte(val)
			}
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim, secret and configMap are supported by the runner", v.Name)
		}
		for key, data := range files {
			if err := os.WriteFile(filepath.Join(dir, key), data, 0o640); err != nil {
				return nil, err
			}
		}
		dirs[v.Name] = dir
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		dir := filepath.Join(podDir, "volumes", serviceAccountVolume)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		sa := spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		expiry := int64(3600)
		tr, err := k.client.CoreV1().ServiceAccounts(meta.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("service account token for %s/%s: %w", meta.Namespace, sa, err)
		}
		for file, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": k.kube.CAData, "namespace": []byte(meta.Namespace)} {
			if err := os.WriteFile(filepath.Join(dir, file), data, 0o640); err != nil {
				return nil, err
			}
		}
		dirs[serviceAccountVolume] = dir
	}
	// fsGroup and runAsUser: the files belong to the container's user, as
	// a kubelet's volume ownership management leaves them.
	for _, dir := range dirs {
		if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// volumeOwner is the uid and gid a kubelet leaves a pod's volumes to: the
// container's user and the pod's fsGroup (-1: unchanged).
func (k *Kubelet) volumeOwner(spec corev1.PodSpec) [2]int {
	owner := [2]int{-1, -1}
	if sc := spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		owner[1] = int(*sc.FSGroup)
	}
	if u, _, ok := runAs(spec, spec.Containers[0]); ok {
		owner[0] = int(u)
	}
	return owner
}

func (k *Kubelet) waitSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s *corev1.Secret
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		s, err = k.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

// runAs is the container's user and group, the container's settings over
// the pod's.
func runAs(spec corev1.PodSpec, c corev1.Container) (uid, gid int64, ok bool) {
	uid, gid = -1, -1
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if uid < 0 {
		return 0, 0, false
	}
	if gid < 0 {
		gid = uid
	}
	return uid, gid, true
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(NAME) with its value as the kubelet does: $$ is a
// literal $, and unknown references stay as they are.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Probe runs the container's readiness (or liveness) httpGet probe once, as
// the kubelet does: no credentials, no certificate verification. It returns
// the HTTP status.
func (p *Pod) Probe(ctx context.Context, liveness bool) (int, error) {
	c := p.Spec.Containers[0]
	probe := c.ReadinessProbe
	if liveness {
		probe = c.LivenessProbe
	}
	if probe == nil || probe.HTTPGet == nil {
		return 0, fmt.Errorf("pod %s has no httpGet probe", p.Name)
	}
	get := probe.HTTPGet
	port := get.Port.IntValue()
	if get.Port.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == get.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	return p.AnonymousGet(ctx, scheme, port, get.Path)
}

// AnonymousGet sends GET scheme://<pod IP>:port/path with no credentials
// and no certificate verification, as the kubelet's prober does, and
// returns the HTTP status.
func (p *Pod) AnonymousGet(ctx context.Context, scheme string, port int, path string) (int, error) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // as the kubelet's prober
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s:%d%s", scheme, p.IP, port, path), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// WaitReady polls the readiness probe until it answers 2xx or 3xx.
func (p *Pod) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := p.proc.Poll(ctx, 250*time.Millisecond, func() error {
		code, err := p.Probe(ctx, false)
		if err != nil {
			return err
		}
		if code < 200 || code >= 400 {
			return fmt.Errorf("readiness probe answered %d", code)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pod %s not ready: %w\n%s", p.Name, err, p.proc.Tail(logTailLines))
	}
	return nil
}

// WaitExit waits for a run-to-completion container (a Job's) and fails
// unless it exits 0.
func (p *Pod) WaitExit(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for p.proc.Running() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s still running: %w", p.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got := p.proc.Exited(); got != "exited with status 0" {
		return fmt.Errorf("pod %s %s\n%s", p.Name, got, p.proc.Tail(logTailLines))
	}
	return nil
}

// Stop sends SIGTERM and waits, as a pod deletion does.
func (p *Pod) Stop() error { return p.proc.Stop() }

// Running reports whether the container's process is alive.
func (p *Pod) Running() bool { return p.proc.Running() }

// LogContains reports whether the container's output holds s.
func (p *Pod) LogContains(s string) bool { return p.proc.LogContains(s) }

// Log is the tail of the container's output.
func (p *Pod) Log() string { return p.proc.Tail(logTailLines) }

// PID is the container's process ID (0 when stopped): the runner execs
// through unshare, sh, env and setpriv, so it is the program's own.
func (p *Pod) PID() int { return p.proc.PID() }
