#!/usr/bin/env bash
# Builds helm from the Go module pinned in helm/go.mod, and copies the CRDs the chart's optional
# objects need (prometheus-operator's ServiceMonitor and PrometheusRule, cert-manager's
# Certificate) from the modules pinned in crds/go.mod, into a cache outside the git tree, next to
# the control-plane binaries of build.sh but under its own key (a hash of both go.sum files and
# this script), so bumping helm never rebuilds kube-apiserver.
# Prints the directory holding `helm` and `crds/*.yaml` on its last line.
#
# Used by scripts/test.sh (helm lint, helm template, the manifests drift check) and by the e2e
# test that dry-runs the rendered chart (PLACER_E2E_HELM_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${PLACER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placer-e2e}
key=$(cat "$here/helm/go.sum" "$here/crds/go.sum" "$here/build-helm.sh" | sha256sum | cut -c1-16)
out="$cache_root/helm-$key"
if [ -x "$out/helm" ] && [ -f "$out/crds/servicemonitors.yaml" ] \
  && [ -f "$out/crds/prometheusrules.yaml" ] && [ -f "$out/crds/certificates.yaml" ]; then
  echo "helm cached in $out" >&2
  echo "$out"
  exit 0
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp/crds"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
hv=$(cd "$here/helm" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
start=$(date +%s)
echo "building helm $hv (a cold build takes a few minutes)" >&2
(cd "$here/helm" && go build -trimpath \
  -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$hv" \
  -o "$out.tmp/helm" helm.sh/helm/v3/cmd/helm)
echo "built in $(( $(date +%s) - start ))s" >&2
# `go mod download` checks each module against crds/go.sum.
module_dir() {
  (cd "$here/crds" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}
prom=$(module_dir github.com/prometheus-operator/prometheus-operator)
for kind in servicemonitors prometheusrules; do
  cp "$prom/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$out.tmp/crds/$kind.yaml"
done
cm=$(module_dir github.com/cert-manager/cert-manager)
cp "$cm/deploy/crds/cert-manager.io_certificates.yaml" "$out.tmp/crds/certificates.yaml"
chmod -R u+w "$out.tmp"
"$out.tmp/helm" version --short >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
