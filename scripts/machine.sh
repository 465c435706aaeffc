#!/usr/bin/env bash
# Prints the facts a benchmark result needs next to it: when, on what machine,
# built by which toolchain, from which commit. bench.sh and scale.sh add their
# own tool versions after it.
set -euo pipefail
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpus: $(nproc)"
echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "kernel: $(uname -r)"
echo "rustc: $(rustc --version)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src tests Cargo.toml 2>/dev/null || echo ' (+ uncommitted changes)')"
