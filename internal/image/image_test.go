package image

import (
	"bytes"
	"testing"
	"time"
)

func TestQualified(t *testing.T) {
	tests := []struct{ name, ref, want string }{
		{name: "short name", ref: "event-apiserver:v1", want: "docker.io/library/event-apiserver:v1"},
		{name: "docker hub user", ref: "someone/event-apiserver:v1", want: "docker.io/someone/event-apiserver:v1"},
		{name: "registry", ref: "registry.example.com/ea/event-apiserver:v1", want: "registry.example.com/ea/event-apiserver:v1"},
		{name: "registry with port", ref: "localhost:5000/event-apiserver:v1", want: "localhost:5000/event-apiserver:v1"},
		{name: "localhost", ref: "localhost/event-apiserver:v1", want: "localhost/event-apiserver:v1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := qualified(tc.ref); got != tc.want {
				t.Errorf("qualified(%q) = %q, want %q", tc.ref, got, tc.want)
			}
		})
	}
}

func TestLayerRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name  string
		files []File
	}{
		{name: "root", files: []File{{Path: "/"}}},
		{name: "escapes", files: []File{{Path: "../x"}}},
		{name: "twice", files: []File{{Path: "/a"}, {Path: "a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Layer(tc.files, time.Unix(0, 0)); err == nil {
				t.Errorf("Layer accepted %v", tc.files)
			}
		})
	}
}

// Same inputs, same bytes, whatever the order files are given in.
func TestWriteIsReproducible(t *testing.T) {
	spec := func(files ...File) Spec {
		return Spec{Name: "event-apiserver", Tag: "v1", Architecture: "amd64", OS: "linux", Created: time.Unix(1700000000, 0), Files: files,
			Config: ContainerConfig{User: "65532:65532", Entrypoint: []string{"/bin"}}}
	}
	a, b := File{Path: "/bin", Mode: 0o755, Data: []byte("x")}, File{Path: "/etc/passwd", Mode: 0o644, Data: []byte("y")}
	var one, two bytes.Buffer
	if err := Write(&one, spec(a, b)); err != nil {
		t.Fatal(err)
	}
	if err := Write(&two, spec(b, a)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Errorf("two writes of one image differ")
	}
	if err := Write(&one, Spec{Name: "x"}); err == nil {
		t.Errorf("Write accepted an image with no tag")
	}
}
