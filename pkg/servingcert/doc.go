// Package servingcert gives every replica of an aggregated event-apiserver
// one serving certificate, kept in one Secret and trusted through the
// APIService's caBundle, with nobody making a certificate by hand.
//
// Why in-process rather than cert-manager: an aggregated server is useless
// until its APIService trusts it, and cert-manager is one more operator that
// must be installed, upgraded and running first (metrics-server ships
// without it for the same reason). The apiserver libraries already serve
// from a dynamic certificate provider, and the server already holds a client
// of kube-apiserver, so generating the certificate, agreeing on it through
// one Secret and patching the caBundle is a few hundred lines with no new
// dependency. Gatekeeper's cert-controller does the same for webhooks.
//
// How replicas agree: the Secret is the only state. Each replica reads it,
// decides (decide, a pure function) whether the CA or the leaf must be made
// or renewed, and writes with create or update-with-resourceVersion, so when
// several replicas decide at once exactly one write wins; the others see a
// conflict, read the winner's Secret and find nothing left to do.
//
// Why no request fails during a renewal:
//   - A replica publishes the Secret's CA bundle into every APIService it
//     owns before it serves a leaf from that Secret, so kube-apiserver trusts
//     a certificate before any replica presents it.
//   - A renewed CA is added in front of the bundle and the old CA stays until
//     it expires, so replicas still serving the previous leaf stay trusted
//     until they pick up the new one (they poll the Secret every resync
//     period, well inside the renewal window).
package servingcert
