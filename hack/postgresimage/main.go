// Command postgresimage writes the PostgreSQL image deploy/components/postgres
// runs, for the real-cluster tier, which reaches no registry: Debian's
// PostgreSQL server (initdb, postgres, pg_isready, its modules and share
// files, the time zones, /bin/sh for initdb's popen and every shared
// library ldd lists for them) with
// hack/postgres-entrypoint as the entrypoint, under the component's image
// reference. hack/build-cluster-images.sh runs it.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/image"
)

func main() {
	output := flag.String("output", "", "the archive to write")
	ref := flag.String("reference", "docker.io/library/postgres:17", "the image reference, name:tag")
	entrypoint := flag.String("entrypoint", "", "the static entrypoint binary (hack/postgres-entrypoint)")
	pgDir := flag.String("pg-dir", "/usr/lib/postgresql/15", "Debian's PostgreSQL directory (bin/, lib/)")
	share := flag.String("share-dir", "/usr/share/postgresql/15", "PostgreSQL's share directory (pg_config --sharedir)")
	arch := flag.String("arch", "amd64", "the GOARCH of the binaries")
	epoch := flag.Int64("created", 0, "creation time and every file's mtime, in seconds since the epoch")
	flag.Parse()
	if err := write(*output, *ref, *entrypoint, *pgDir, *share, *arch, time.Unix(*epoch, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "postgresimage:", err)
		os.Exit(1)
	}
}

func write(output, ref, entrypoint, pgDir, share, arch string, created time.Time) error {
	i := strings.LastIndex(ref, ":")
	if i < 0 || i < strings.LastIndex(ref, "/") || output == "" || entrypoint == "" {
		return fmt.Errorf("want --output, --entrypoint and --reference=name:tag (got %q)", ref)
	}
	files := map[string]int64{}
	var elves []string
	for _, b := range []string{"postgres", "initdb", "pg_isready"} {
		p := filepath.Join(pgDir, "bin", b)
		files[p] = 0o755
		elves = append(elves, p)
	}
	// llvmjit would pull in all of LLVM; without it PostgreSQL runs without JIT.
	// initdb runs postgres through popen and system, which need /bin/sh.
	elves = append(elves, "/bin/sh")
	mods, err := filepath.Glob(filepath.Join(pgDir, "lib", "*.so"))
	if err != nil {
		return err
	}
	for _, m := range mods {
		if !strings.HasPrefix(filepath.Base(m), "llvmjit") {
			files[m] = 0o644
			elves = append(elves, m)
		}
	}
	for _, dir := range []string{share, "/usr/share/zoneinfo"} {
		if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				files[p] = 0o644
			}
			return nil
		}); err != nil {
			return err
		}
	}
	libs, err := sharedLibraries(elves)
	if err != nil {
		return err
	}
	for _, l := range libs {
		files[l] = 0o755
	}
	files["/bin/sh"] = 0o755

	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var imageFiles []image.File
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		imageFiles = append(imageFiles, image.File{Path: p, Mode: files[p], Data: data})
	}
	ep, err := os.ReadFile(entrypoint)
	if err != nil {
		return err
	}
	imageFiles = append(imageFiles,
		image.File{Path: "/usr/local/bin/postgres-entrypoint", Mode: 0o755, Data: ep},
		// The official image's postgres user: initdb needs a name for its uid.
		image.File{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\npostgres:x:999:999:postgres:/var/lib/postgresql:/sbin/nologin\n")},
		image.File{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\npostgres:x:999:\n")},
	)
	spec := image.Spec{
		Name:         ref[:i],
		Tag:          ref[i+1:],
		Architecture: arch,
		OS:           "linux",
		Created:      created,
		Files:        imageFiles,
		Config: image.ContainerConfig{
			Entrypoint: []string{"/usr/local/bin/postgres-entrypoint"},
			Env:        []string{"PATH=" + filepath.Join(pgDir, "bin") + ":/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"},
			WorkingDir: "/",
			User:       "999",
		},
	}
	if err := image.WriteFile(output, spec); err != nil {
		return err
	}
	fmt.Println(spec.Reference())
	return nil
}

// sharedLibraries are the libraries, and the dynamic loader, that ldd
// resolves for the ELF files.
func sharedLibraries(elves []string) ([]string, error) {
	seen := map[string]bool{}
	for _, e := range elves {
		out, err := exec.Command("ldd", e).Output()
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", e, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("ldd %s: %s", e, strings.TrimSpace(line))
			}
			for _, field := range strings.Fields(line) {
				if strings.HasPrefix(field, "/") {
					seen[field] = true
				}
			}
		}
	}
	var libs []string
	for l := range seen {
		libs = append(libs, l)
	}
	return libs, nil
}
