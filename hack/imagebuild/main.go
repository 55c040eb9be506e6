// Command imagebuild writes event-apiserver's image archive: the static
// binary, the build machine's CA bundle and a passwd/group naming the
// nonroot user, on no base image. hack/build-image.sh runs it; see
// internal/image for the archive's format.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/image"
)

// Paths and user as distroless's static-debian images have them, so
// manifests written for those (runAsUser: 65532, SSL_CERT_FILE) fit.
const (
	binaryPath  = "/event-apiserver"
	caPath      = "/etc/ssl/certs/ca-certificates.crt"
	nonrootUser = "65532"
	passwd      = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"
	group       = "root:x:0:\nnonroot:x:65532:\n"
)

func main() {
	var (
		binary   = flag.String("binary", "", "static event-apiserver binary to put in the image")
		caFile   = flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to put in the image (Debian's ca-certificates)")
		output   = flag.String("output", "", "image archive to write")
		name     = flag.String("name", "event-apiserver", "image name")
		tag      = flag.String("tag", "", "image tag")
		arch     = flag.String("arch", "amd64", "the binary's GOARCH")
		epoch    = flag.Int64("created", 0, "creation time and every file's mtime, in seconds since the epoch (SOURCE_DATE_EPOCH)")
		revision = flag.String("revision", "", "git commit, for the org.opencontainers.image.revision label")
		source   = flag.String("source", "", "repository URL, for the org.opencontainers.image.source label")
	)
	flag.Parse()
	if err := run(*binary, *caFile, *output, *name, *tag, *arch, time.Unix(*epoch, 0).UTC(), *revision, *source); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(binary, caFile, output, name, tag, arch string, created time.Time, revision, source string) error {
	if binary == "" || output == "" || tag == "" {
		return fmt.Errorf("--binary, --output and --tag are required")
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("reading the CA bundle (apt-get install ca-certificates): %w", err)
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "event-apiserver",
		"org.opencontainers.image.description": "A Kubernetes API server for Events (core/v1 and events.k8s.io/v1)",
		"org.opencontainers.image.version":     tag,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if revision != "" {
		labels["org.opencontainers.image.revision"] = revision
	}
	if source != "" {
		labels["org.opencontainers.image.source"] = source
	}
	spec := image.Spec{
		Name:         name,
		Tag:          tag,
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		Files: []image.File{
			{Path: binaryPath, Mode: 0o755, Data: bin},
			{Path: caPath, Mode: 0o644, Data: ca},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		},
		Config: image.ContainerConfig{
			User:       nonrootUser + ":" + nonrootUser,
			Entrypoint: []string{binaryPath},
			WorkingDir: "/",
			Labels:     labels,
		},
	}

	if err := image.WriteFile(output, spec); err != nil {
		return err
	}
	fmt.Println(spec.Reference())
	return nil
}
