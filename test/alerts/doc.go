// Package alerts tests the PrometheusRules the project ships
// (deploy/components/monitoring and the Helm chart's monitoring template)
// with Prometheus's own rule parser and evaluator: every expression parses,
// every copy holds the same rules, and over synthetic series the Event
// alerts fire on the data they are meant for and stay quiet on the rest.
//
// It is a Go module of its own, as hack/tools is: github.com/prometheus/
// prometheus requires k8s.io/client-go v0.37, which would move the root
// module's k8s.io modules off v0.36.3. It imports nothing from the root
// module and reads the manifests from the repository (../..), rendering the
// chart with _output/bin/helm (hack/build-helm.sh). hack/test.sh runs it
// once the helm build is done.
package alerts
