package framework

// The shipped manifests as the tests read them: deploy/'s kustomizations
// rendered with kubectl kustomize v1.36.3, split into objects.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// RenderOverlay runs kubectl kustomize (v1.36.3) on deploy/<dir>.
func RenderOverlay(t *testing.T, dir string) []byte {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := KubectlAt(t, KubectlBinary(t), filepath.Join(t.TempDir(), "none"), nil,
		"kustomize", filepath.Join(root, "deploy", dir))
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/%s: %v\n%s", dir, err, stderr)
	}
	return []byte(stdout)
}

// SplitManifests decodes a multi-document YAML stream.
func SplitManifests(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// FindObject is the object of kind and name among objs; the test fails
// without one.
func FindObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// FromUnstructured converts u into a typed object, refusing unknown fields.
func FromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
