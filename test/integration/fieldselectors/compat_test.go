package fieldselectors

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestFieldSelectorCompatibility loads the fixture Events into our server
// and into kube-apiserver v1.36.3, each over its own etcd, and checks that
// every field selector kube-apiserver supports selects the same Events on
// both, that both refuse unknown labels with the same Status, and that
// watches with those selectors deliver the same changes.
func TestFieldSelectorCompatibility(t *testing.T) {
	t.Parallel()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "_output", "bin", "kube-apiserver")); err != nil {
		t.Skip("kube-apiserver " + framework.KubeVersion + " is not built (_output/bin/kube-apiserver; hack/build-kube.sh): " +
			"cannot compare field selectors with it")
	}
	etcd := framework.StartEtcd(t)
	ours := framework.StartServer(t, framework.ServerOptions{EtcdServers: etcd.ClientURL()})
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	ourClient := framework.UnthrottledClient(t, ours.Config(t))
	kubeClient := framework.UnthrottledClient(t, kube.RestConfig())
	ctx := context.Background()
	fsLoadFixtures(ctx, t, ourClient, false)
	fsLoadFixtures(ctx, t, kubeClient, true)

	// list runs one LIST on both servers and returns the fixture Events each
	// selected, or fails the test.
	list := func(t *testing.T, version, namespace, selector string) (ourKeys, kubeKeys []string) {
		t.Helper()
		opts := metav1.ListOptions{FieldSelector: selector}
		ourKeys, err := fsList(ctx, ourClient, version, namespace, opts)
		if err != nil {
			t.Fatalf("event-apiserver: %s LIST %s ?fieldSelector=%s: %v", version, fsScope(namespace), selector, err)
		}
		kubeKeys, err = fsList(ctx, kubeClient, version, namespace, opts)
		if err != nil {
			t.Fatalf("kube-apiserver: %s LIST %s ?fieldSelector=%s: %v", version, fsScope(namespace), selector, err)
		}
		return fsOnlyFixtures(ourKeys), fsOnlyFixtures(kubeKeys)
	}

	for _, version := range []string{fsCore, fsEvents} {
		t.Run(strings.ReplaceAll(version, "/", "-"), func(t *testing.T) {
			// The case table, where kube-apiserver knows every label: both
			// servers must return what the table says.
			t.Run("table", func(t *testing.T) {
				for _, c := range fsVersionCases(version) {
					if !fsKubeSelector(version, c.selector) {
						continue
					}
					t.Run(fsScope(c.namespace)+"/"+c.name, func(t *testing.T) {
						ourKeys, kubeKeys := list(t, version, c.namespace, c.selector)
						want := fsKeys(t, c.want)
						if !slices.Equal(ourKeys, kubeKeys) || !slices.Equal(kubeKeys, want) {
							t.Errorf("LIST %s ?fieldSelector=%s\nevent-apiserver %v\n kube-apiserver %v\n           want %v",
								fsScope(c.namespace), c.selector, ourKeys, kubeKeys, want)
						}

						// Paged (kubectl sends limit=500), two Events a page.
						ourKeys, ourPages, ourErr := fsListPaged(ctx, ourClient, version, c.namespace, c.selector, 2)
						kubeKeys, kubePages, kubeErr := fsListPaged(ctx, kubeClient, version, c.namespace, c.selector, 2)
						if ourErr != nil || kubeErr != nil {
							t.Fatalf("paged LIST %s ?fieldSelector=%s: event-apiserver %v, kube-apiserver %v", fsScope(c.namespace), c.selector, ourErr, kubeErr)
						}
						ourKeys, kubeKeys = fsOnlyFixtures(ourKeys), fsOnlyFixtures(kubeKeys)
						if fsNamespacePaging(c) {
							// kube-apiserver loses or repeats items here
							// (see fsNamespacePaging); we page correctly.
							if !slices.Equal(ourKeys, want) {
								t.Errorf("paged LIST %s ?fieldSelector=%s\nevent-apiserver %v (%d pages)\n           want %v",
									fsScope(c.namespace), c.selector, ourKeys, ourPages, want)
							}
							t.Logf("kube-apiserver: paged LIST %s ?fieldSelector=%s returns %v (%d pages), want %v",
								fsScope(c.namespace), c.selector, kubeKeys, kubePages, want)
						} else if !slices.Equal(ourKeys, kubeKeys) || !slices.Equal(ourKeys, want) {
							t.Errorf("paged LIST %s ?fieldSelector=%s\nevent-apiserver %v (%d pages)\n kube-apiserver %v (%d pages)\n           want %v",
								fsScope(c.namespace), c.selector, ourKeys, ourPages, kubeKeys, kubePages, want)
						}
					})
				}
			})

			// Every kube-apiserver label with every value the fixtures
			// hold, an empty one and an absent one, `=` and `!=`, in each
			// namespace and across all.
			t.Run("every label", func(t *testing.T) {
				values := fsFieldValues(t, ourClient)
				for _, label := range fsLabels[version][:fsKubeLabelCount[version]] {
					t.Run(label, func(t *testing.T) {
						for _, value := range values[fsCoreLabel(label)] {
							for _, op := range []string{"=", "!="} {
								selector := label + op + fields.EscapeValue(value)
								for _, ns := range []string{"", fsNSOne, fsNSTwo, fsNSDefault} {
									ourKeys, kubeKeys := list(t, version, ns, selector)
									if !slices.Equal(ourKeys, kubeKeys) {
										t.Errorf("LIST %s ?fieldSelector=%s\nevent-apiserver %v\n kube-apiserver %v", fsScope(ns), selector, ourKeys, kubeKeys)
									}
								}
							}
						}
					})
				}
			})

			// The same Status for a label neither server knows.
			t.Run("unsupported", func(t *testing.T) {
				for _, c := range fsErrorCases {
					if c.version != version {
						continue
					}
					t.Run(fsScope(c.namespace)+"/"+c.name, func(t *testing.T) {
						opts := metav1.ListOptions{FieldSelector: c.selector}
						_, ourErr := fsList(ctx, ourClient, version, c.namespace, opts)
						_, kubeErr := fsList(ctx, kubeClient, version, c.namespace, opts)
						ourStatus, ok1 := ourErr.(interface{ Status() metav1.Status })
						kubeStatus, ok2 := kubeErr.(interface{ Status() metav1.Status })
						if !ok1 || !ok2 {
							t.Fatalf("LIST ?fieldSelector=%s: event-apiserver %v, kube-apiserver %v; want both to refuse", c.selector, ourErr, kubeErr)
						}
						if got, want := ourStatus.Status(), kubeStatus.Status(); !reflect.DeepEqual(got, want) {
							t.Errorf("LIST ?fieldSelector=%s:\nevent-apiserver %#v\n kube-apiserver %#v", c.selector, got, want)
						}
						if got, _ := fsStatusOf(kubeErr); got != fsUnsupported(c.label) {
							t.Errorf("kube-apiserver: LIST ?fieldSelector=%s: %#v, want %#v", c.selector, got, fsUnsupported(c.label))
						}
					})
				}
			})

			// Our labels beyond kube-apiserver's: it refuses them, we
			// serve them (the intended difference).
			t.Run("labels kube-apiserver lacks", func(t *testing.T) {
				for _, label := range fsLabels[version][fsKubeLabelCount[version]:] {
					selector := label + "=x"
					_, err := fsList(ctx, kubeClient, version, "", metav1.ListOptions{FieldSelector: selector})
					if got, _ := fsStatusOf(err); got != fsUnsupported(label) {
						t.Errorf("kube-apiserver: LIST ?fieldSelector=%s: %v, want %q", selector, err, fsUnsupported(label).Message)
					}
					if _, err := fsList(ctx, ourClient, version, "", metav1.ListOptions{FieldSelector: selector}); err != nil {
						t.Errorf("event-apiserver: LIST ?fieldSelector=%s: %v", selector, err)
					}
				}
			})

		})
	}

	// Watches with selectors kube-apiserver supports deliver the same
	// changes from both (kube-apiserver watches etcd directly, we watch
	// the cache).
	t.Run("watch", func(t *testing.T) {
		var specs []fsWatchSpec
		for _, spec := range fsWatchSpecs {
			if spec.kube {
				specs = append(specs, spec)
			}
		}
		ourGot := fsRunWatchScript(t, ourClient, specs, false)
		kubeGot := fsRunWatchScript(t, kubeClient, specs, true)
		for _, spec := range specs {
			t.Run(spec.name, func(t *testing.T) {
				if !slices.Equal(ourGot[spec.name], kubeGot[spec.name]) || !slices.Equal(kubeGot[spec.name], spec.want) {
					t.Errorf("%s watch ?fieldSelector=%s (%s)\nevent-apiserver delivered\n%s kube-apiserver delivered\n%swant\n%s",
						spec.version, spec.selector, fsScope(spec.namespace),
						fsLines(ourGot[spec.name]), fsLines(kubeGot[spec.name]), fsLines(spec.want))
				}
			})
		}
	})
}

// fsKubeSelector reports whether kube-apiserver knows every label of a
// selector.
func fsKubeSelector(version, selector string) bool {
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return false
	}
	for _, r := range parsed.Requirements() {
		if !fsKubeLabel(version, r.Field) {
			return false
		}
	}
	return true
}

// fsCoreLabel is the core/v1 spelling of a kube-apiserver events.k8s.io/v1
// label (pkg/apis/events/v1/conversion.go).
func fsCoreLabel(label string) string {
	if label == "reportingController" {
		return "reportingComponent"
	}
	if rest, ok := strings.CutPrefix(label, "regarding."); ok {
		return "involvedObject." + rest
	}
	return label
}

// fsKubeFields reads kube-apiserver's selectable fields from a core/v1
// Event; only to pick the values the sweep tries, not to judge results.
var fsKubeFields = map[string]func(*corev1.Event) string{
	"involvedObject.kind":            func(e *corev1.Event) string { return e.InvolvedObject.Kind },
	"involvedObject.namespace":       func(e *corev1.Event) string { return e.InvolvedObject.Namespace },
	"involvedObject.name":            func(e *corev1.Event) string { return e.InvolvedObject.Name },
	"involvedObject.uid":             func(e *corev1.Event) string { return string(e.InvolvedObject.UID) },
	"involvedObject.apiVersion":      func(e *corev1.Event) string { return e.InvolvedObject.APIVersion },
	"involvedObject.resourceVersion": func(e *corev1.Event) string { return e.InvolvedObject.ResourceVersion },
	"involvedObject.fieldPath":       func(e *corev1.Event) string { return e.InvolvedObject.FieldPath },
	"reason":                         func(e *corev1.Event) string { return e.Reason },
	"reportingComponent":             func(e *corev1.Event) string { return e.ReportingController },
	"source":                         func(e *corev1.Event) string { return e.Source.Component },
	"type":                           func(e *corev1.Event) string { return e.Type },
	"metadata.namespace":             func(e *corev1.Event) string { return e.Namespace },
	"metadata.name":                  func(e *corev1.Event) string { return e.Name },
}

// fsFieldValues returns, for each kube-apiserver core/v1 label, every value
// the fixture Events hold, plus "" and a value none holds, sorted.
func fsFieldValues(t *testing.T, client kubernetes.Interface) map[string][]string {
	t.Helper()
	list, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for label, read := range fsKubeFields {
		set := map[string]bool{"": true, "no-such-value": true}
		for i := range list.Items {
			set[read(&list.Items[i])] = true
			if label == "source" {
				set[list.Items[i].ReportingController] = true
			}
		}
		for v := range set {
			out[label] = append(out[label], v)
		}
		sort.Strings(out[label])
	}
	if len(out) != fsKubeLabelCount[fsCore] {
		t.Fatalf("test bug: %d fields, want %d", len(out), fsKubeLabelCount[fsCore])
	}
	return out
}
