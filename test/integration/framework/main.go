package framework

// The integration tier's gate. Its tests run real etcd, kube-apiserver and
// kubectl binaries from _output/bin, which hack/test.sh builds (several
// minutes cold). Without them a plain `go test ./...` would build etcd on the
// fly, skip some tests, and run the rest past go test's default timeout; so
// instead the whole package runs no test and says what to build, the way
// kube's integration tests are kept out of its unit run.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// IntegrationBinaries are the prebuilt binaries every integration test
// package needs under _output/bin. event-apiserver is not one of them: it is
// built from the checkout by ServerBinary.
var IntegrationBinaries = []string{"etcd", "kube-apiserver", "kubectl"}

// MissingBinaries lists the IntegrationBinaries absent from _output/bin.
func MissingBinaries() ([]string, error) {
	var missing []string
	for _, name := range IntegrationBinaries {
		path, err := testbed.OutputBinary(name)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(path); err != nil {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// Main is an integration test package's TestMain: it runs the tests when
// _output/bin holds the IntegrationBinaries, and otherwise runs none (go test
// reports "[no tests to run]") after saying on stderr what to build. While
// the tests run it holds the checkout's integration lock shared, so that a
// test of another package that calls Exclusive runs alone.
func Main(m *testing.M) {
	flag.Parse()
	missing, err := MissingBinaries()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests: %v\n", err)
		os.Exit(1)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "integration tests skipped: _output/bin lacks %s; "+
			"run hack/build-etcd.sh and hack/build-kube.sh (or hack/test.sh, which runs every tier)\n",
			strings.Join(missing, ", "))
		if err := flag.Set("test.run", "^$"); err != nil {
			fmt.Fprintf(os.Stderr, "integration tests: %v\n", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	if err := holdShared(); err != nil {
		fmt.Fprintf(os.Stderr, "integration tests: taking the integration tests' lock: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
