#!/usr/bin/env bash
# Builds kwok (fake nodes and pods against a real kube-apiserver, no container runtime) from the
# Go module pinned in kwok/go.mod into a cache outside the git tree, next to the control-plane
# binaries of build.sh but under its own key (a hash of kwok/go.sum and this script), so bumping
# kwok never rebuilds kube-apiserver and vice versa.
# Prints the directory holding the `kwok` binary on its last line.
#
# PLACER_E2E_KWOK_SEED=<path to a kwok binary built from the same go.sum> fills an empty cache
# with a copy of it instead of building (used when a build of the same pin already exists).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${PLACER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placer-e2e}
key=$(cat "$here/kwok/go.sum" "$here/build-kwok.sh" | sha256sum | cut -c1-16)
out="$cache_root/kwok-$key"
if [ -x "$out/kwok" ]; then
  echo "kwok cached in $out" >&2
  echo "$out"
  exit 0
fi
mkdir -p "$out.tmp"
if [ -n "${PLACER_E2E_KWOK_SEED:-}" ]; then
  echo "seeding the kwok cache from $PLACER_E2E_KWOK_SEED" >&2
  cp "$PLACER_E2E_KWOK_SEED" "$out.tmp/kwok"
else
  export CGO_ENABLED=0 GOFLAGS=-mod=mod
  kv=$(cd "$here/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
  start=$(date +%s)
  echo "building kwok $kv (a cold build takes a few minutes)" >&2
  (cd "$here/kwok" && go build -trimpath -ldflags="-s -w" -o "$out.tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
  echo "built in $(( $(date +%s) - start ))s" >&2
fi
"$out.tmp/kwok" --version >&2
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
