// Pins the modules whose CRDs the e2e test installs before it dry-runs the chart: nothing is
// built from them. prometheus-operator ships ServiceMonitor and PrometheusRule
// (example/prometheus-operator-crd), cert-manager its Certificate (deploy/crds). Kept apart from
// helm/go.mod so their requirements never move helm's.
module placer.invalid/e2e/crds

go 1.26.8

require (
	github.com/cert-manager/cert-manager v1.21.2
	github.com/prometheus-operator/prometheus-operator v0.85.0
)
