// Package image writes a container image archive from files on disk, with
// no base image and no registry: one layer, one config, and both index
// formats in one tarball, as `docker save` has written since Docker 25.
//
// The archive holds a docker-archive index (manifest.json, repositories),
// which docker load, podman load, kind load image-archive and ctr import all
// accept, and an OCI image layout (oci-layout, index.json, blobs/) over the
// same blobs, which OCI tools (skopeo, crane, ctr) read directly. Every
// timestamp is the given Created time, owners are root and entries are
// sorted, so the same inputs give the same bytes.
package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image spec v1.1.
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	// Uncompressed: the layer's digest is then its diff ID, and the archive
	// compresses as a whole if it must travel.
	MediaTypeLayer = "application/vnd.oci.image.layer.v1.tar"
)

// File is one regular file of the root filesystem.
type File struct {
	// Path is absolute in the image, e.g. /etc/passwd.
	Path string
	Mode int64
	Data []byte
}

// Spec is the image to write.
type Spec struct {
	// Name and Tag make the reference, e.g. event-apiserver and v0.1.0.
	Name string
	Tag  string
	// Architecture and OS as in GOARCH and GOOS.
	Architecture string
	OS           string
	Created      time.Time
	Files        []File
	Config       ContainerConfig
}

// ContainerConfig is the part of the OCI image config that says how the
// container runs.
type ContainerConfig struct {
	User       string            `json:"User,omitempty"`
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// Config is the OCI image config (application/vnd.oci.image.config.v1+json).
type Config struct {
	Created      time.Time       `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       ContainerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`
	History      []History       `json:"history,omitempty"`
}

type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type History struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// Descriptor points at a blob.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Index is an OCI image index (index.json).
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// DockerManifest is one entry of a docker-archive manifest.json.
type DockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// Reference is name:tag.
func (s Spec) Reference() string { return s.Name + ":" + s.Tag }

// WriteFile writes the image archive to path through a temporary file
// renamed into place, so a build cut short never leaves a partial archive
// that a later cached build would take for a whole one.
func WriteFile(path string, s Spec) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := Write(w, s); err != nil {
		_ = f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Write writes the image archive to w.
func Write(w io.Writer, s Spec) error {
	if s.Name == "" || s.Tag == "" {
		return fmt.Errorf("image name and tag are required")
	}
	layer, err := Layer(s.Files, s.Created)
	if err != nil {
		return err
	}
	layerDigest := digest(layer)

	cfg := Config{
		Created:      s.Created.UTC(),
		Architecture: s.Architecture,
		OS:           s.OS,
		Config:       s.Config,
		RootFS:       RootFS{Type: "layers", DiffIDs: []string{layerDigest}},
		History:      []History{{Created: s.Created.UTC(), CreatedBy: "hack/build-image.sh"}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDigest := digest(cfgJSON)

	manifest := Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        Descriptor{MediaType: MediaTypeConfig, Digest: cfgDigest, Size: int64(len(cfgJSON))},
		Layers:        []Descriptor{{MediaType: MediaTypeLayer, Digest: layerDigest, Size: int64(len(layer))}},
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	index := Index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests: []Descriptor{{
			MediaType: MediaTypeManifest,
			Digest:    digest(manifestJSON),
			Size:      int64(len(manifestJSON)),
			Annotations: map[string]string{
				// containerd (ctr import, kind) names the image from this one;
				// it wants the fully qualified reference.
				"io.containerd.image.name":          qualified(s.Reference()),
				"org.opencontainers.image.ref.name": s.Tag,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	dockerJSON, err := json.Marshal([]DockerManifest{{
		Config:   blobPath(cfgDigest),
		RepoTags: []string{s.Reference()},
		Layers:   []string{blobPath(layerDigest)},
	}})
	if err != nil {
		return err
	}
	repositoriesJSON, err := json.Marshal(map[string]map[string]string{
		s.Name: {s.Tag: strings.TrimPrefix(layerDigest, "sha256:")},
	})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(dirHeader(dir, s.Created)); err != nil {
			return err
		}
	}
	entries := []struct {
		name string
		data []byte
	}{
		{blobPath(layerDigest), layer},
		{blobPath(cfgDigest), cfgJSON},
		{blobPath(digest(manifestJSON)), manifestJSON},
		{"index.json", indexJSON},
		{"manifest.json", dockerJSON},
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"repositories", repositoriesJSON},
	}
	for _, e := range entries {
		if err := writeFile(tw, e.name, 0o644, e.data, s.Created); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Layer is the uncompressed layer tarball holding files and their parent
// directories, in path order.
func Layer(files []File, created time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	byPath := map[string]File{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean(f.Path), "/")
		if p == "" || p == "." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("bad path %q in image", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("%s given twice", f.Path)
		}
		byPath[p] = f
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	names := make([]string, 0, len(dirs)+len(byPath))
	for d := range dirs {
		names = append(names, d)
	}
	for p := range byPath {
		names = append(names, p)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		if dirs[name] {
			if err := tw.WriteHeader(dirHeader(name, created)); err != nil {
				return nil, err
			}
			continue
		}
		f := byPath[name]
		if err := writeFile(tw, name, f.Mode, f.Data, created); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func dirHeader(name string, mtime time.Time) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX}
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte, mtime time.Time) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     mode,
		Size:     int64(len(data)),
		ModTime:  mtime.UTC().Truncate(time.Second),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + strings.TrimPrefix(d, "sha256:") }

// qualified expands a short reference the way docker does: event-apiserver
// becomes docker.io/library/event-apiserver.
func qualified(ref string) string {
	name := ref
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		name = ref[:i]
	}
	first, _, hasSlash := strings.Cut(name, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return ref
	}
	if !hasSlash {
		return "docker.io/library/" + ref
	}
	return "docker.io/" + ref
}
