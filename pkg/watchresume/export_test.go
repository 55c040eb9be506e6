package watchresume

// Exported for storage_test.go, which builds the Event store with
// pkg/apiserver and pkg/registry/event/storage (both import this package) and so is
// an external test package.
var ResumesTotal = resumesTotal

const (
	SourceCache = sourceCache
	SourceEtcd  = sourceEtcd
)
