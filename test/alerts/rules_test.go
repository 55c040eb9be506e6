package alerts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// ruleFile is one PrometheusRule the project ships: where it comes from,
// and its spec, which is Prometheus's rule file format.
type ruleFile struct {
	origin string
	spec   []byte
}

// promQL is the parser Prometheus uses by default: no experimental syntax.
var promQL = parser.NewParser(parser.Options{})

// repoRoot is the root module's directory, two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/eventapiserver/event-apiserver\n")) {
		t.Fatalf("%s is not the repository root: %v", root, err)
	}
	return root
}

// shippedRules finds every PrometheusRule: in the manifests under deploy/
// (the kustomize components and overlays; not the chart's templates, which
// are not YAML until rendered) and in the chart rendered with monitoring on,
// in each mode that allows it.
func shippedRules(t *testing.T) []ruleFile {
	t.Helper()
	root := repoRoot(t)
	var files []ruleFile
	deploy := filepath.Join(root, "deploy")
	err := filepath.WalkDir(deploy, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == filepath.Join(deploy, "helm") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return nil
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, prometheusRules(t, rel, content)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"history-only", "aggregated"} {
		files = append(files, prometheusRules(t, "helm template --set mode="+mode,
			renderChart(t, root, "--set", "mode="+mode, "--set", "monitoring.enabled=true"))...)
	}
	return files
}

// prometheusRules are the specs of the PrometheusRules in a stream of YAML
// documents.
func prometheusRules(t *testing.T, origin string, content []byte) []ruleFile {
	t.Helper()
	var out []ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for {
		var obj struct {
			Kind string    `yaml:"kind"`
			Spec yaml.Node `yaml:"spec"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
		if obj.Kind != "PrometheusRule" {
			continue
		}
		spec, err := yaml.Marshal(&obj.Spec)
		if err != nil {
			t.Fatalf("%s: %v", origin, err)
		}
		out = append(out, ruleFile{origin: origin, spec: spec})
	}
}

// renderChart runs helm template on the chart as the docs install it,
// with helm's configuration, cache and data in a temporary directory so
// that nothing of the machine's own helm setup takes part. helm is
// _output/bin/helm; missing, the test is skipped, except under CI=true,
// as the integration tests do.
func renderChart(t *testing.T, root string, set ...string) []byte {
	t.Helper()
	helm := filepath.Join(root, "_output", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		msg := helm + " is missing: run hack/build-helm.sh (hack/test.sh builds it before this test)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	args := append([]string{"template", "event-apiserver", "deploy/helm/event-apiserver", "--namespace", "event-apiserver",
		"--kube-version", "v1.36.3"}, set...)
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func parseRules(t *testing.T, f ruleFile) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(f.spec, false, model.UTF8Validation, promQL, promslog.NewNopLogger())
	if len(errs) > 0 {
		t.Fatalf("%s: %v", f.origin, errors.Join(errs...))
	}
	return groups
}

// TestShippedRulesParse: every PrometheusRule the project ships is a valid
// rule file to Prometheus (unknown fields refused, every expression and
// annotation template parsed), and every copy holds the same rules: the
// component's, the chart's in each mode.
func TestShippedRulesParse(t *testing.T) {
	files := shippedRules(t)
	var origins []string
	for _, f := range files {
		origins = append(origins, f.origin)
	}
	if len(files) < 3 {
		t.Fatalf("found PrometheusRules in %v, want the monitoring component's and the chart's in both modes", origins)
	}
	t.Logf("PrometheusRules: %v", origins)
	first := parseRules(t, files[0])
	for _, f := range files[1:] {
		if groups := parseRules(t, f); !reflect.DeepEqual(groups, first) {
			t.Errorf("%s holds other rules than %s", f.origin, files[0].origin)
		}
	}
	var alerts []string
	for _, g := range first.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	for _, want := range []string{
		"EventAPIServerNamespaceWarnings", "EventAPIServerWarningReasonRising", "EventAPIServerEventMetricsFolded",
		"EventAPIServerHistoryCaptureBehind", "EventAPIServerHistoryStoreErrors", "EventAPIServerHistoryVersionsLost",
	} {
		if !strings.Contains(" "+strings.Join(alerts, " ")+" ", " "+want+" ") {
			t.Errorf("no alert %s among %v", want, alerts)
		}
	}
}
