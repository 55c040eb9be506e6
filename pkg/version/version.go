// Package version says which build of event-apiserver is running and which
// Kubernetes API it serves.
//
// /version must keep kube's shape: clients (kubectl, client-go discovery,
// controllers) gate on major/minor and parse gitVersion as semver, so those
// stay at the Kubernetes API level the server is built on, and the project's
// own version travels in gitVersion's semver build metadata, the way k3s
// (v1.36.3+k3s1) and rke2 report theirs. kubectl version then parses it and
// sees no skew.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// KubernetesVersion is the k8s.io/apiserver release go.mod pins: the API
// behaviour clients get.
const KubernetesVersion = "1.36.3"

// Set with -ldflags "-X <package>.<name>=..." by hack/lib/version.sh.
var (
	version      string // git describe, e.g. v0.1.0-3-gabcdef0 or v0.0.0-20261123093000-abcdef012345
	gitCommit    string
	gitTreeState string // clean or dirty
	buildDate    string // RFC 3339, UTC
)

// metadataSuffix marks the project in gitVersion's build metadata.
const metadataSuffix = "eventapiserver"

// Build is what the binary was built from.
type Build struct {
	Version      string
	GitCommit    string
	GitTreeState string
	BuildDate    string
}

// Get returns the build's version. Without ldflags (go build, go run) it
// falls back to the VCS stamp go build embeds, as a Go pseudo-version, so
// the version stays parseable.
func Get() Build {
	b := Build{Version: version, GitCommit: gitCommit, GitTreeState: gitTreeState, BuildDate: buildDate}
	if b.Version != "" {
		return b
	}
	return fromBuildInfo()
}

func fromBuildInfo() Build {
	b := Build{Version: "v0.0.0-devel"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	var revision, modified string
	var at time.Time
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	if revision == "" {
		return b
	}
	b.GitCommit = revision
	b.GitTreeState = "clean"
	b.Version = fmt.Sprintf("v0.0.0-%s-%.12s", at.UTC().Format("20060102150405"), revision)
	if modified == "true" {
		b.GitTreeState = "dirty"
		b.Version += "-dirty"
	}
	if !at.IsZero() {
		b.BuildDate = at.UTC().Format(time.RFC3339)
	}
	return b
}

// GitVersion is /version's gitVersion: the Kubernetes API version with the
// project's version as build metadata, e.g.
// v1.36.3+eventapiserver.v0.1.0-3-gabcdef0.
func (b Build) GitVersion() string {
	return "v" + KubernetesVersion + "+" + metadataSuffix + "." + metadata(b.Version)
}

// String is what --version prints.
func (b Build) String() string {
	return fmt.Sprintf("event-apiserver %s (Kubernetes API v%s)", b.Version, KubernetesVersion)
}

// metadata keeps only what semver allows in build metadata
// ([0-9A-Za-z-] identifiers separated by dots), so a branch name or an
// odd tag cannot make gitVersion unparseable.
func metadata(v string) string {
	var sb strings.Builder
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-':
			sb.WriteRune(r)
		case r == '.':
			sb.WriteRune(r)
		default:
			sb.WriteRune('-')
		}
	}
	// Empty identifiers (leading, trailing or doubled dots) are invalid.
	parts := strings.Split(sb.String(), ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return "unknown"
	}
	return strings.Join(kept, ".")
}

// Fill overwrites info's build fields with this build's, keeping the
// Kubernetes major/minor and emulation fields the server computed.
func (b Build) Fill(info *apimachineryversion.Info) {
	info.GitVersion = b.GitVersion()
	info.GitCommit = b.GitCommit
	info.GitTreeState = b.GitTreeState
	info.BuildDate = b.BuildDate
	info.GoVersion = runtime.Version()
	info.Compiler = runtime.Compiler
	info.Platform = runtime.GOOS + "/" + runtime.GOARCH
}
