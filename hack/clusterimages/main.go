// Command clusterimages writes the container images the real-cluster tier
// (internal/cluster) imports into containerd, since no registry is
// reachable: each is one static binary on no base image under the upstream
// image's reference, written by internal/image. hack/build-cluster-images.sh
// runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/image"
)

// images is the repeated --image flag: FILE=REFERENCE=BINARY=PATH.
type images []imageFlag

type imageFlag struct{ file, ref, binary, path string }

func (i *images) String() string { return fmt.Sprint(len(*i), " images") }

func (i *images) Set(v string) error {
	parts := strings.Split(v, "=")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[2] == "" || !strings.HasPrefix(parts[3], "/") {
		return fmt.Errorf("want FILE=REFERENCE=BINARY=/PATH, got %q", v)
	}
	*i = append(*i, imageFlag{parts[0], parts[1], parts[2], parts[3]})
	return nil
}

func main() {
	var list images
	flag.Var(&list, "image", "FILE=REFERENCE=BINARY=/PATH: write FILE (in --output-dir), the image REFERENCE holding BINARY at /PATH as its entrypoint (repeatable)")
	arch := flag.String("arch", "amd64", "the binaries' GOARCH")
	outDir := flag.String("output-dir", "", "directory for the archives")
	epoch := flag.Int64("created", 0, "creation time and every file's mtime, in seconds since the epoch")
	flag.Parse()
	for _, img := range list {
		if err := write(filepath.Join(*outDir, img.file), img, *arch, time.Unix(*epoch, 0).UTC()); err != nil {
			fmt.Fprintln(os.Stderr, "clusterimages:", err)
			os.Exit(1)
		}
	}
}

func write(output string, img imageFlag, arch string, created time.Time) error {
	i := strings.LastIndex(img.ref, ":")
	if i < 0 || i < strings.LastIndex(img.ref, "/") {
		return fmt.Errorf("%s: want name:tag", img.ref)
	}
	name, tag := img.ref[:i], img.ref[i+1:]
	bin, err := os.ReadFile(img.binary)
	if err != nil {
		return err
	}
	spec := image.Spec{
		Name:         name,
		Tag:          tag,
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		Files:        []image.File{{Path: img.path, Mode: 0o755, Data: bin}},
		Config: image.ContainerConfig{
			Entrypoint: []string{img.path},
			// The upstream images run their commands by name (kubeadm's
			// manifests and the overlays say `etcd`, `kube-apiserver`).
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir: "/",
		},
	}
	if err := image.WriteFile(output, spec); err != nil {
		return err
	}
	fmt.Println(spec.Reference())
	return nil
}
