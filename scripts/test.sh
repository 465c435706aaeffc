#!/usr/bin/env bash
# Runs every test placer has: unit tests, HTTP tests, ops tests (TLS, reload,
# metrics) and the end-to-end tests against a real etcd + kube-apiserver +
# stock kube-scheduler built from Go modules, with kwok playing the kubelets of the
# scale test's fake nodes (both cached after the first build).
#
# Fails if any test was ignored: an end-to-end test that cannot start its
# control plane fails rather than skips, and nothing is silently left out.
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl (in the machine image) renders the mutual-TLS kustomize Component for its e2e test.
for tool in cargo go openssl kubectl; do
  command -v "$tool" >/dev/null || { echo "test.sh: '$tool' is required but not installed" >&2; exit 1; }
done

start=$(date +%s)
bin_dir=$(bash tests/cluster/build.sh | tail -n 1)
echo "test.sh: control-plane binaries ready in $(( $(date +%s) - start ))s: $bin_dir"
export PLACER_E2E_BIN_DIR="$bin_dir"
kwok_dir=$(bash tests/cluster/build-kwok.sh | tail -n 1)
echo "test.sh: kwok ready in $(( $(date +%s) - start ))s: $kwok_dir"
export PLACER_E2E_KWOK_DIR="$kwok_dir"
helm_dir=$(bash tests/cluster/build-helm.sh | tail -n 1)
echo "test.sh: helm ready in $(( $(date +%s) - start ))s: $helm_dir"
export PLACER_E2E_HELM_DIR="$helm_dir"

# The chart: lint and render every mode, plain and with every optional part on; manifests/ must
# be what the chart renders (scripts/render-manifests.sh). The e2e test `chart` dry-runs it.
chart_start=$(date +%s)
everything=(--set tls.enabled=true --set tls.certManager.enabled=true
  --set tls.certManager.issuerRef.name=ca --set tls.clientCA.enabled=true
  --set scheduler.enabled=true --set networkPolicy.enabled=true
  --set 'networkPolicy.metricsPeers[0].namespaceSelector.matchLabels.name=monitoring'
  --set rbac.explainPods=true --set rbac.authDelegation=true
  --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true
  --set monitoring.dashboard.enabled=true)
for mode in extender standalone both; do
  "$helm_dir/helm" lint --strict charts/placer --set mode="$mode" >/dev/null
  "$helm_dir/helm" lint --strict charts/placer --set mode="$mode" "${everything[@]}" >/dev/null
  "$helm_dir/helm" template placer charts/placer --set mode="$mode" >/dev/null
  "$helm_dir/helm" template placer charts/placer --set mode="$mode" "${everything[@]}" >/dev/null
done
HELM="$helm_dir/helm" bash scripts/render-manifests.sh --check
echo "test.sh: helm lint and template of charts/placer in $(( $(date +%s) - chart_start ))s"

mkdir -p target
log=target/test-output.log
set +e
cargo test --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || exit "$status"

if grep -E '^test result: .* [1-9][0-9]* ignored' "$log"; then
  echo "test.sh: some tests were ignored; every test must run" >&2
  exit 1
fi
passed=$(grep -oE '[0-9]+ passed' "$log" | awk '{s += $1} END {print s + 0}')
if ! grep -q 'Running tests/e2e/main.rs' "$log"; then
  echo "test.sh: the end-to-end tests did not run" >&2
  exit 1
fi
echo "test.sh: $passed tests passed in $(( $(date +%s) - start ))s"
