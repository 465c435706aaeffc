#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-scheduler and kube-controller-manager (its PV controller
# completes volume bindings in the volume tests) from the Go modules pinned in
# k8s/go.mod and etcd/go.mod into a cache outside the git tree.
#
# The cache directory is keyed by a hash of both go.sum files and this script, so a
# version bump (or a change of build flags) rebuilds and an unchanged pin is a no-op.
# Prints the directory holding the three binaries on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${PLACER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placer-e2e}
key=$(cat "$here/k8s/go.sum" "$here/etcd/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)
out="$cache_root/bin-$key"
if [ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-scheduler" ] \
  && [ -x "$out/kube-controller-manager" ]; then
  echo "control-plane binaries cached in $out" >&2
  echo "$out"
  exit 0
fi
mkdir -p "$out.tmp"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
kv=$(cd "$here/k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kv" | cut -d. -f2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kv \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/client-go/pkg/version.gitVersion=$kv"
start=$(date +%s)
echo "building kube-apiserver, kube-scheduler and kube-controller-manager $kv (cold builds take several minutes)" >&2
(cd "$here/k8s" && go build -trimpath -tags=selinux,notest -ldflags="$ldflags" -o "$out.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-controller-manager)
echo "building etcd" >&2
(cd "$here/etcd" && go build -trimpath -ldflags="-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
rm -rf "$out" && mv "$out.tmp" "$out"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$out"
