package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// rootModulePath is the module whose go.mod marks the repository root.
const rootModulePath = "github.com/eventapiserver/event-apiserver"

// RepoRoot walks up from the working directory (for a test, its package
// directory) to the directory whose go.mod declares rootModulePath: where
// hack/ and the binaries in _output/bin are.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if goModDeclares(filepath.Join(dir, "go.mod"), rootModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s in %s or its parents", rootModulePath, wd)
		}
		dir = parent
	}
}

func goModDeclares(path, module string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}

// ErrNotBuilt is wrapped by KubeBinary when hack/build-kube.sh has not
// built the binary: tests skip rather than fail.
var ErrNotBuilt = errors.New("not built: run hack/build-kube.sh")

// OutputBinary is _output/bin/<name> under the repository root.
func OutputBinary(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "bin", name), nil
}

var etcdBuild struct {
	once sync.Once
	path string
	err  error
}

// EtcdBinary is _output/bin/etcd after hack/build-etcd.sh, run once per
// process: instant when the binary is up to date, a build when it is
// missing or was built from another etcd version. When the script fails
// but a binary exists, that binary is used (the failure is logged).
func EtcdBinary() (string, error) {
	etcdBuild.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			etcdBuild.err = err
			return
		}
		etcdBuild.path = filepath.Join(root, "_output", "bin", "etcd")
		cmd := exec.Command("bash", filepath.Join(root, "hack", "build-etcd.sh"))
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if _, statErr := os.Stat(etcdBuild.path); statErr == nil {
			klog.InfoS("hack/build-etcd.sh failed; using the etcd binary there is", "path", etcdBuild.path, "err", err, "output", string(out))
			return
		}
		etcdBuild.err = fmt.Errorf("%s is missing and hack/build-etcd.sh failed: %v\n%s", etcdBuild.path, err, out)
	})
	return etcdBuild.path, etcdBuild.err
}

var kubeBinaries struct {
	sync.Mutex
	checked map[string]error // name -> version check result
}

// KubeBinary is _output/bin/<name> (kube-apiserver or kubectl), checked
// once per process to report KubeVersion. A missing binary is an error
// wrapping ErrNotBuilt.
func KubeBinary(name string) (string, error) {
	path, err := OutputBinary(name)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s %s %w", name, KubeVersion, ErrNotBuilt)
	}
	kubeBinaries.Lock()
	defer kubeBinaries.Unlock()
	if kubeBinaries.checked == nil {
		kubeBinaries.checked = map[string]error{}
	}
	verr, done := kubeBinaries.checked[name]
	if !done {
		verr = checkKubeBinaryVersion(name, path)
		kubeBinaries.checked[name] = verr
	}
	if verr != nil {
		return "", fmt.Errorf("%w: run hack/build-kube.sh", verr)
	}
	return path, nil
}

func checkKubeBinaryVersion(name, path string) error {
	var cmd *exec.Cmd
	var want string
	if name == "kubectl" {
		cmd, want = exec.Command(path, "version", "--client"), "Client Version: "+KubeVersion
	} else {
		cmd, want = exec.Command(path, "--version"), "Kubernetes "+KubeVersion
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("%s reports %q, want %q", strings.Join(cmd.Args, " "), strings.TrimSpace(string(out)), want)
}

// BuildServer builds cmd/event-apiserver from this checkout into out, with
// the race detector when race is set.
func BuildServer(out string, race bool) error {
	return buildCommand("event-apiserver", out, race)
}

// buildCommand builds ./cmd/<name> from this checkout into out.
func buildCommand(name, out string, race bool) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/"+name)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return nil
}

var serverBuild struct {
	once sync.Once
	path string
	err  error
}

// ServerBinary is _output/bin/event-apiserver, built by BuildServer once
// per process (so that parallel tests share one build); race is the race
// flag of that first build. A race build goes to _output/bin/race (the same
// base name, which tests look processes up by), so that hack/test.sh's race
// tier and the plain tier do not overwrite each other's server.
func ServerBinary(race bool) (string, error) {
	serverBuild.once.Do(func() {
		name := "event-apiserver"
		if race {
			name = filepath.Join("race", name)
		}
		if serverBuild.path, serverBuild.err = OutputBinary(name); serverBuild.err == nil {
			serverBuild.err = BuildServer(serverBuild.path, race)
		}
	})
	return serverBuild.path, serverBuild.err
}

var timelineBuild struct {
	once sync.Once
	path string
	err  error
}

// TimelineBinary is _output/bin/kubectl-timeline, the kubectl plugin, built
// from this checkout once per process, for tests that run it as a user
// does.
func TimelineBinary() (string, error) {
	timelineBuild.once.Do(func() {
		if timelineBuild.path, timelineBuild.err = OutputBinary("kubectl-timeline"); timelineBuild.err == nil {
			timelineBuild.err = buildCommand("kubectl-timeline", timelineBuild.path, false)
		}
	})
	return timelineBuild.path, timelineBuild.err
}
