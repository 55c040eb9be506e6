package capture

// VersionFromProto is versionFromProto for the external tests, which decode
// through the server's scheme (pkg/apiserver imports this package).
var VersionFromProto = versionFromProto
