package server

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/image"
	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestImage builds the image with hack/build-image.sh, as a user would,
// and checks the archive: both indexes agree and every blob matches its
// digest; the config runs the binary as nonroot; the root filesystem holds
// the static binary, the CA bundle and passwd/group and nothing else; a
// second build gives the same bytes. Then the binary taken out of the root
// filesystem starts and answers /readyz anonymously. Where a container
// runtime is installed (Debian's containerd and runc; the test runs as
// root), the archive is imported with ctr and run as a container, which
// must serve /readyz as user 65532. With podman installed the archive is
// also loaded into it; running it there needs crun to set rlimits, which
// some sandboxes refuse, so podman run is tried only with
// EVENT_APISERVER_TEST_PODMAN_RUN=1.
func TestImage(t *testing.T) {
	t.Parallel()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "_output", "image", "event-apiserver.tar")
	ref := buildImage(t, root)
	first := sha256File(t, archive)
	if again := buildImage(t, root); again != ref {
		t.Fatalf("second build tagged %q, first %q", again, ref)
	}
	if second := sha256File(t, archive); second != first {
		t.Errorf("two builds of one checkout differ: %s, %s", first, second)
	}
	name, tag, _ := strings.Cut(ref, ":")
	if name != "event-apiserver" || !strings.HasPrefix(tag, "v") {
		t.Fatalf("reference %q, want event-apiserver:v...", ref)
	}

	files := readTar(t, mustRead(t, archive))
	blob := func(digest string) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("archive has no blob %s", digest)
		}
		return data
	}
	for name, data := range files {
		if hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hexDigest != "" && sha256Hex(data) != hexDigest {
			t.Errorf("blob %s has digest %s", name, sha256Hex(data))
		}
	}

	// docker-archive index.
	var docker []image.DockerManifest
	mustUnmarshal(t, files["manifest.json"], &docker)
	if len(docker) != 1 || len(docker[0].RepoTags) != 1 || docker[0].RepoTags[0] != ref || len(docker[0].Layers) != 1 {
		t.Fatalf("manifest.json: %+v, want one image tagged %s with one layer", docker, ref)
	}
	var repositories map[string]map[string]string
	mustUnmarshal(t, files["repositories"], &repositories)
	if repositories[name][tag] == "" {
		t.Errorf("repositories has no %s: %s", ref, files["repositories"])
	}

	// OCI layout over the same blobs.
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %s", files["oci-layout"])
	}
	var index image.Index
	mustUnmarshal(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/library/"+ref {
		t.Fatalf("index.json: %+v", index)
	}
	var manifest image.Manifest
	mustUnmarshal(t, blob(index.Manifests[0].Digest), &manifest)
	if len(manifest.Layers) != 1 || "blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:") != docker[0].Layers[0] ||
		"blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:") != docker[0].Config {
		t.Fatalf("OCI manifest %+v and manifest.json %+v name different blobs", manifest, docker[0])
	}

	var config image.Config
	mustUnmarshal(t, blob(manifest.Config.Digest), &config)
	layer := blob(manifest.Layers[0].Digest)
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != "sha256:"+sha256Hex(layer) {
		t.Errorf("rootfs.diff_ids %v, want the layer's digest", config.RootFS.DiffIDs)
	}
	if config.OS != "linux" || config.Config.User != "65532:65532" || config.Config.WorkingDir != "/" ||
		strings.Join(config.Config.Entrypoint, " ") != "/event-apiserver" ||
		config.Config.Labels["org.opencontainers.image.version"] != tag ||
		len(config.Config.Labels["org.opencontainers.image.revision"]) != 40 ||
		config.Config.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("image config %+v", config)
	}

	// The root filesystem: exactly these, owned by root, dated the build.
	rootfs := readTar(t, layer)
	var names []string
	for name := range rootfs {
		names = append(names, name)
	}
	sort.Strings(names)
	want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "event-apiserver"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("root filesystem holds %v, want %v", names, want)
	}
	if !strings.Contains(string(rootfs["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(rootfs["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd/group lack the nonroot user: %s %s", rootfs["etc/passwd"], rootfs["etc/group"])
	}
	if !bytes.Contains(rootfs["etc/ssl/certs/ca-certificates.crt"], []byte("-----BEGIN CERTIFICATE-----")) {
		t.Errorf("the CA bundle holds no certificate")
	}

	bin := filepath.Join(t.TempDir(), "event-apiserver")
	if err := os.WriteFile(bin, rootfs["event-apiserver"], 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, bin)
	if out := runBinary(t, bin, "--version"); out != "event-apiserver "+tag+" (Kubernetes API v1.36.3)\n" {
		t.Errorf("--version printed %q", out)
	}

	server := framework.StartServer(t, framework.ServerOptions{Binary: bin})
	anonymous := framework.NewRawClient(t, &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: server.CACertFile()}}, "")
	if r := anonymous.Do(t, "GET", "/readyz", nil, nil); r.Code != 200 || string(r.Body) != "ok" {
		t.Errorf("anonymous /readyz: %d %s", r.Code, r.Body)
	}
	checkVersionDocument(t, anonymous.Do(t, "GET", "/version", nil, nil).Body, tag)

	if _, err := exec.LookPath("containerd"); err == nil && os.Geteuid() == 0 {
		runInContainerd(t, archive, ref)
	} else {
		t.Logf("no containerd here (or not root): ran the binary from the unpacked root filesystem only")
	}
	if _, err := exec.LookPath("podman"); err == nil && os.Geteuid() == 0 {
		checkPodman(t, archive, ref)
	} else {
		t.Logf("no podman here (or not root): checked the unpacked root filesystem only")
	}
}

// runInContainerd starts a private containerd, imports the archive with ctr
// import (what kind load image-archive does) and runs the image with its
// own entrypoint and user on the host network, the data dir on a volume.
func runInContainerd(t *testing.T, archive, ref string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "containerd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "containerd.sock")
	containerd := &testbed.Process{
		Name:    "containerd",
		Path:    "containerd",
		Args:    []string{"--root=" + filepath.Join(dir, "root"), "--state=" + filepath.Join(dir, "state"), "--address=" + socket},
		LogPath: filepath.Join(dir, "containerd.log"),
	}
	if p, err := exec.LookPath("containerd"); err == nil {
		containerd.Path = p
	}
	if err := containerd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", containerd.Tail(40))
		}
		_ = containerd.Stop()
	})
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command("ctr", append([]string{"--address=" + socket, "--namespace=event-apiserver-test"}, args...)...).CombinedOutput()
		return string(out), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		_, err := ctr("version")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("containerd did not answer: %v", err)
	}
	// The native snapshotter works wherever overlayfs mounts are refused.
	if out, err := ctr("images", "import", "--snapshotter=native", archive); err != nil {
		t.Fatalf("ctr images import: %v: %s", err, out)
	}

	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dataDir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	port := framework.FreePort(t)
	const id = "event-apiserver"
	if out, err := ctr("run", "--detach", "--net-host", "--snapshotter=native",
		"--mount=type=bind,src="+dataDir+",dst=/data,options=rbind:rw",
		"docker.io/library/"+ref, id,
		"/event-apiserver", "--data-dir=/data", "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port)); err != nil {
		t.Fatalf("ctr run: %v: %s", err, out)
	}
	t.Cleanup(func() {
		_, _ = ctr("task", "kill", "--signal=SIGKILL", id)
		_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			_, err := ctr("task", "delete", id)
			return err == nil, nil
		})
		_, _ = ctr("containers", "delete", id)
	})

	var lastErr error
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		caFile := filepath.Join(dataDir, "certs", "apiserver.crt")
		if _, err := os.Stat(caFile); err != nil {
			lastErr = err
			return false, nil
		}
		client, err := rest.HTTPClientFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}})
		if err != nil {
			return false, err
		}
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			lastErr = err
			return false, nil
		}
		_ = resp.Body.Close()
		lastErr = fmt.Errorf("/readyz: %d", resp.StatusCode)
		return resp.StatusCode == 200, nil
	})
	if err != nil {
		out, _ := ctr("task", "ls")
		t.Fatalf("the container did not become ready: %v (%v); tasks: %s", err, lastErr, out)
	}
	// Written by the container's process: it ran as the image's user.
	info, err := os.Stat(filepath.Join(dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Uid != 65532 || st.Gid != 65532 {
		t.Errorf("the container wrote its data as %+v, want 65532:65532", info.Sys())
	}
	t.Logf("containerd ran %s; /readyz answered 200", ref)
}

func buildImage(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("bash", "hack/build-image.sh")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-image.sh: %v\n%s", err, stderr.String())
	}
	ref := strings.TrimSpace(string(out))
	if file := strings.TrimSpace(string(mustRead(t, filepath.Join(root, "_output", "image", "reference")))); file != ref {
		t.Fatalf("printed %q, _output/image/reference says %q", ref, file)
	}
	return ref
}

// checkStatic: no interpreter and no shared library, so the binary runs on
// an image with no libc.
func checkStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: not static", p.Type)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatal(err)
	}
	if len(libs) != 0 {
		t.Errorf("binary needs %v", libs)
	}
}

func checkPodman(t *testing.T, archive, ref string) {
	t.Helper()
	if out, err := exec.Command("podman", "load", "-i", archive).CombinedOutput(); err != nil {
		t.Fatalf("podman load: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "--force", ref).Run() })
	out, err := exec.Command("podman", "image", "inspect", "--format", "{{.Config.User}} {{.Config.Entrypoint}} {{.Config.WorkingDir}}", ref).CombinedOutput()
	if err != nil {
		t.Fatalf("podman image inspect: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "65532:65532 [/event-apiserver] /" {
		t.Errorf("podman sees user, entrypoint, workdir %q", got)
	}
	if os.Getenv("EVENT_APISERVER_TEST_PODMAN_RUN") != "1" {
		t.Logf("podman load and inspect passed; podman run skipped (set EVENT_APISERVER_TEST_PODMAN_RUN=1 where containers can run)")
		return
	}
	out, err = exec.Command("podman", "run", "--rm", ref, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "event-apiserver v") {
		t.Errorf("podman run %s --version: %v: %s", ref, err, out)
	}
}

func readTar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", hdr.Name, hdr.Uid, hdr.Gid)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = body
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %.300s", err, data)
	}
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func sha256File(t *testing.T, path string) string { return sha256Hex(mustRead(t, path)) }
