package version

import (
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

func TestGitVersion(t *testing.T) {
	tests := []struct {
		name    string
		version string
		want    string
	}{
		{name: "release tag", version: "v0.1.0", want: "v1.36.3+eventapiserver.v0.1.0"},
		{name: "commits after a tag", version: "v0.1.0-3-gabcdef0", want: "v1.36.3+eventapiserver.v0.1.0-3-gabcdef0"},
		{name: "dirty tree", version: "v0.1.0-3-gabcdef0-dirty", want: "v1.36.3+eventapiserver.v0.1.0-3-gabcdef0-dirty"},
		{name: "no tags", version: "v0.0.0-20261123093000-abcdef012345", want: "v1.36.3+eventapiserver.v0.0.0-20261123093000-abcdef012345"},
		{name: "characters semver refuses", version: "v1.0.0+meta/branch_x", want: "v1.36.3+eventapiserver.v1.0.0-meta-branch-x"},
		{name: "empty identifiers", version: ".v1..2.", want: "v1.36.3+eventapiserver.v1.2"},
		{name: "nothing left", version: "...", want: "v1.36.3+eventapiserver.unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Build{Version: tc.version}.GitVersion()
			if got != tc.want {
				t.Fatalf("GitVersion() = %q, want %q", got, tc.want)
			}
			// How kubectl version parses the server's version for its skew check.
			v, err := utilversion.ParseSemantic(got)
			if err != nil {
				t.Fatalf("cannot parse %q: %v", got, err)
			}
			if v.Major() != 1 || v.Minor() != 36 || v.Patch() != 3 || v.PreRelease() != "" {
				t.Errorf("%q parses as %v, want 1.36.3", got, v)
			}
		})
	}
}

func TestGetFromLdflags(t *testing.T) {
	defer func(v, c, s, d string) { version, gitCommit, gitTreeState, buildDate = v, c, s, d }(version, gitCommit, gitTreeState, buildDate)
	version, gitCommit, gitTreeState, buildDate = "v0.2.0", "0123456789abcdef0123456789abcdef01234567", "clean", "2026-11-23T09:30:00Z"

	b := Get()
	if got, want := b.String(), "event-apiserver v0.2.0 (Kubernetes API v1.36.3)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	info := apimachineryversion.Info{Major: "1", Minor: "36", EmulationMajor: "1", EmulationMinor: "36"}
	b.Fill(&info)
	want := apimachineryversion.Info{
		Major: "1", Minor: "36", EmulationMajor: "1", EmulationMinor: "36",
		GitVersion: "v1.36.3+eventapiserver.v0.2.0", GitCommit: gitCommit, GitTreeState: "clean",
		BuildDate: "2026-11-23T09:30:00Z", GoVersion: info.GoVersion, Compiler: info.Compiler, Platform: info.Platform,
	}
	if info != want {
		t.Errorf("Fill() = %+v, want %+v", info, want)
	}
	if info.GoVersion == "" || info.Platform == "" {
		t.Errorf("Fill() left the Go fields empty: %+v", info)
	}
}

// Without ldflags (go test, go run) the version must still parse.
func TestGetWithoutLdflags(t *testing.T) {
	defer func(v string) { version = v }(version)
	version = ""
	b := Get()
	if !strings.HasPrefix(b.Version, "v0.0.0-") {
		t.Errorf("Version = %q, want a v0.0.0- pseudo-version", b.Version)
	}
	if _, err := utilversion.ParseSemantic(b.GitVersion()); err != nil {
		t.Errorf("GitVersion %q does not parse: %v", b.GitVersion(), err)
	}
}
