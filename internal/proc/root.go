package proc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// rootModulePath is the module whose go.mod marks the repository root.
const rootModulePath = "github.com/eventapiserver/event-apiserver"

// RepoRoot walks up from the working directory (for a test, its package
// directory) to the directory whose go.mod declares rootModulePath: where
// hack/ and the binaries in _output/bin are.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if goModDeclares(filepath.Join(dir, "go.mod"), rootModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for module %s in %s or its parents", rootModulePath, wd)
		}
		dir = parent
	}
}

func goModDeclares(path, module string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}
