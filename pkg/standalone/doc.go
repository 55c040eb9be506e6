// Package standalone holds what a server run without a kube-apiserver needs
// to admit its one administrator: generated credentials kept in the data
// directory, the authenticator and authorizer that accept them (and let
// anonymous callers read the public health and version paths, see
// pkg/publicinfo), and the kubeconfig that hands them to kubectl.
package standalone
