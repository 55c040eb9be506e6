package fieldselectors

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// fsKubectlCase is one `kubectl get` with --field-selector.
type fsKubectlCase struct {
	name     string
	resource string
	// namespace is passed with -n; "" means -A, and fsKubeconfigNamespace
	// passes neither (the kubeconfig's namespace, "default").
	namespace string
	selector  string
	want      []string
}

// fsKubeconfigNamespace asks for no namespace flag at all.
const fsKubeconfigNamespace = "(kubeconfig)"

func (c fsKubectlCase) scopeArgs() []string {
	switch c.namespace {
	case "":
		return []string{"-A"}
	case fsKubeconfigNamespace:
		return nil
	}
	return []string{"-n", c.namespace}
}

const (
	fsCoreResource   = "events"
	fsEventsResource = "events.events.k8s.io"
)

var fsKubectlCases = []fsKubectlCase{
	{name: "reason", resource: fsCoreResource, namespace: fsNSOne, selector: "reason=BackOff", want: []string{"pod-a-backoff"}},
	{name: "describe pod", resource: fsCoreResource, namespace: fsNSOne,
		selector: "involvedObject.name=pod-a,involvedObject.namespace=fs-one,involvedObject.uid=uid-pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "describe pod -A", resource: fsCoreResource,
		selector: "involvedObject.name=pod-a,involvedObject.namespace=fs-one,involvedObject.uid=uid-pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "events for pod", resource: fsCoreResource, namespace: fsNSOne,
		selector: "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "events for pod -A", resource: fsCoreResource,
		selector: "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "pod-a-killing"}},
	{name: "describe node", resource: fsCoreResource,
		selector: "involvedObject.kind=Node,involvedObject.uid=uid-node-1,involvedObject.name=node-1,involvedObject.namespace=",
		want:     []string{"node-1-not-ready"}},
	{name: "involvedObjectOrRelated -A", resource: fsCoreResource, selector: "involvedObjectOrRelated.uid=uid-pod-a",
		want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "rs-web-created"}},
	{name: "kubeconfig namespace", resource: fsCoreResource, namespace: fsKubeconfigNamespace, selector: "type=Warning", want: []string{"node-1-not-ready"}},
	{name: "two != -A", resource: fsCoreResource, selector: "type!=Normal,reason!=Failed", want: []string{"pod-a-backoff", "node-1-not-ready"}},
	{name: "source", resource: fsCoreResource, selector: "source=default-scheduler", want: []string{"pod-a-scheduled"}},
	{name: "no match", resource: fsCoreResource, namespace: fsNSTwo, selector: "involvedObject.uid=uid-pod-a", want: nil},

	{name: "regarding.name", resource: fsEventsResource, namespace: fsNSOne, selector: "regarding.name=pod-a",
		want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "describe pod", resource: fsEventsResource, namespace: fsNSOne,
		selector: "regarding.name=pod-a,regarding.namespace=fs-one,regarding.uid=uid-pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "describe pod -A", resource: fsEventsResource,
		selector: "regarding.name=pod-a,regarding.namespace=fs-one,regarding.uid=uid-pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "events for pod", resource: fsEventsResource, namespace: fsNSOne,
		selector: "regarding.kind=Pod,regarding.apiVersion=v1,regarding.name=pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled"}},
	{name: "events for pod -A", resource: fsEventsResource,
		selector: "regarding.kind=Pod,regarding.apiVersion=v1,regarding.name=pod-a",
		want:     []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "pod-a-killing"}},
	{name: "regardingOrRelated node -A", resource: fsEventsResource, selector: "regardingOrRelated.uid=uid-node-1",
		want: []string{"pod-a-scheduled", "node-1-not-ready"}},
	{name: "regardingOrRelated pod", resource: fsEventsResource, namespace: fsNSOne, selector: "regardingOrRelated.uid=uid-pod-a",
		want: []string{"pod-a-started", "pod-a-backoff", "pod-a-scheduled", "rs-web-created"}},
	{name: "reportingController and type -A", resource: fsEventsResource, selector: "reportingController=kubelet,type=Warning",
		want: []string{"pod-a-backoff", "pod-c-failed"}},
	{name: "related.kind", resource: fsEventsResource, namespace: fsNSTwo, selector: "related.kind=Node", want: []string{"pod-c-failed"}},
	{name: "no match -A", resource: fsEventsResource, selector: "regarding.name=nobody", want: nil},
}

// fsKubectlErrorCases are refused by the server; kubectl reports the 400.
var fsKubectlErrorCases = []fsKubectlCase{
	{name: "regarding.name on core", resource: fsCoreResource, namespace: fsNSOne, selector: "regarding.name=pod-a"},
	{name: "note on core -A", resource: fsCoreResource, selector: "note=x"},
	{name: "involvedObject.name on events", resource: fsEventsResource, selector: "involvedObject.name=pod-a"},
	{name: "message on events", resource: fsEventsResource, namespace: fsNSOne, selector: "message=x"},
}

// fsKubectlEventsCase is one `kubectl events`.
type fsKubectlEventsCase struct {
	name string
	args []string
	want []string
}

var fsKubectlEventsCases = []fsKubectlEventsCase{
	{name: "namespace", args: []string{"-n", fsNSOne}, want: fsInNamespace(fsNSOne)},
	{name: "kubeconfig namespace", want: fsInNamespace(fsNSDefault)},
	{name: "all namespaces", args: []string{"-A"}, want: fsAll},
	{name: "Warning in namespace", args: []string{"-n", fsNSOne, "--types=Warning"}, want: []string{"pod-a-backoff"}},
	{name: "Warning -A", args: []string{"-A", "--types=Warning"}, want: []string{"pod-a-backoff", "node-1-not-ready", "pod-c-failed"}},
	{name: "Normal -A", args: []string{"-A", "--types=Normal"}, want: []string{"pod-a-started", "pod-a-scheduled", "rs-web-created", "pod-a-killing", "deploy-web-scaled"}},
}

// fsTestKubectl runs the preinstalled kubectl, unchanged, against a server
// holding the fixture Events.
func fsTestKubectl(t *testing.T, kubeconfig string) {
	framework.PreinstalledKubectl(t) // skip without kubectl

	for _, c := range fsKubectlCases {
		t.Run("get/"+c.resource+"/"+c.name, func(t *testing.T) {
			want := fsKeys(t, c.want)
			args := append([]string{"get", c.resource}, c.scopeArgs()...)
			args = append(args, "--field-selector", c.selector)

			// Objects, as scripts read them.
			out := framework.MustKubectl(t, kubeconfig, append(args, "--no-headers",
				"-o", "custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name")...)
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 {
					got = append(got, f[0]+"/"+f[1])
				} else if len(f) != 0 {
					t.Fatalf("unexpected line %q in:\n%s", line, out)
				}
			}
			sort.Strings(got)
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, want) {
				t.Errorf("kubectl %s -o custom-columns\n got %v\nwant %v", strings.Join(args, " "), got, want)
			}

			// The server-side table, as people read it.
			out = framework.MustKubectl(t, kubeconfig, append(args, "-o", "wide")...)
			got = []string{}
			if len(want) > 0 {
				for _, row := range framework.ParseTable(t, out) {
					ns := row["NAMESPACE"]
					if c.namespace != "" {
						ns = c.namespace
						if ns == fsKubeconfigNamespace {
							ns = fsNSDefault
						}
					}
					got = append(got, ns+"/"+row["NAME"])
				}
				sort.Strings(got)
			} else if strings.TrimSpace(out) != "" {
				t.Errorf("kubectl %s -o wide printed rows, want none:\n%s", strings.Join(args, " "), out)
			}
			if !slices.Equal(got, want) {
				t.Errorf("kubectl %s -o wide\n got %v\nwant %v\n%s", strings.Join(args, " "), got, want, out)
			}
		})
	}

	for _, c := range fsKubectlErrorCases {
		t.Run("get/"+c.resource+"/unsupported/"+c.name, func(t *testing.T) {
			args := append([]string{"get", c.resource}, c.scopeArgs()...)
			args = append(args, "--field-selector", c.selector)
			stdout, stderr, err := framework.Kubectl(t, kubeconfig, args...)
			if err == nil {
				t.Fatalf("kubectl %s succeeded, want a 400:\n%s", strings.Join(args, " "), stdout)
			}
			// kubectl words the server's 400 this way
			// (cli-runtime resource.Helper.List).
			gvr := map[string]string{fsCoreResource: "/v1, Resource=events", fsEventsResource: "events.k8s.io/v1, Resource=events"}[c.resource]
			label := c.selector[:strings.IndexAny(c.selector, "=!")]
			want := fmt.Sprintf("Error from server (BadRequest): Unable to find %q that match label selector \"\", field selector %q: field label not supported: %s",
				gvr, c.selector, label)
			if strings.TrimSpace(stderr) != want {
				t.Errorf("kubectl %s: stderr %q, want %q", strings.Join(args, " "), stderr, want)
			}
		})
	}

	for _, c := range fsKubectlEventsCases {
		t.Run("events/"+c.name, func(t *testing.T) {
			args := append([]string{"events"}, c.args...)
			out := framework.MustKubectl(t, kubeconfig, args...)
			rows := framework.ParseTable(t, out)
			got := []string{}
			for _, row := range rows {
				// Each fixture's message is "msg:<its name>".
				name, ok := strings.CutPrefix(row["MESSAGE"], "msg:")
				if !ok {
					t.Errorf("row with unexpected message: %v", row)
					continue
				}
				ns := row["NAMESPACE"]
				if !slices.Contains(c.args, "-A") {
					ns = fsNSDefault
					if i := slices.Index(c.args, "-n"); i >= 0 {
						ns = c.args[i+1]
					}
				}
				got = append(got, ns+"/"+name)
			}
			sort.Strings(got)
			if want := fsKeys(t, c.want); !slices.Equal(got, want) {
				t.Errorf("kubectl %s\n got %v\nwant %v\n%s", strings.Join(args, " "), got, want, out)
			}
		})
	}
}
