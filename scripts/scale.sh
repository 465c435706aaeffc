#!/usr/bin/env bash
# The scale benchmark (docs/benchmarks.md, "Scheduling at scale"): scheduler
# configurations schedule the same workloads on one control plane whose nodes are
# kwok's fake nodes, one configuration at a time:
#
#   a. kube-scheduler, default plugins      b. kube-scheduler + placer as extender
#   c. placer standalone                    d. kube-scheduler, placer's comparable plugins
#   e. kube-scheduler + the floor (../shared/tools/floor) as extender
#   f. placer --mode both: (c) while the test probes its extender verbs every 20 ms
#   g. placer standalone, kube-scheduler's default profile (examples/default-profile.yaml),
#      nodes sampled as (a) samples them (percentageOfNodesToScore 0: adaptive)
#   h. (a) with percentageOfNodesToScore 100     i. (g) with percentageOfNodesToScore 100
#
# Workloads: SchedulingBasic (pods created while the scheduler runs), pre-created
# (pods exist before it starts) and, when named, unschedulable (1,000 pods no node
# takes; the CPU spent on them over a window while the nodes heartbeat).
#
# Builds the control plane, kwok, release placer and (for e) the floor, then runs
# the e2e test `scale` (release build) once per size and prints its tables (also
# written to $OUT/<size>.md).
#
# Everything talks to 127.0.0.1 only. Bounds: each run must bind every pod within
# 60 s + 20 ms per pod (else it fails); each size's test is killed after
# SCALE_TIMEOUT seconds.
#
# Knobs (environment): SCALE_SIZES (default "1000x3000 5000x10000"), SCALE_CONFIGS
# (letters, default abcdefghi), SCALE_WORKLOADS (default basic,precreated; add
# unschedulable), SCALE_WINDOW (the unschedulable window, seconds, default 120),
# SCALE_UNSCHEDULABLE_CONFIGS (letters among SCALE_CONFIGS; default all of them),
# SCALE_OUT (default target/scale-run), SCALE_TIMEOUT (per size, default 3600).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SCALE_SIZES:-1000x3000 5000x10000}
OUT=${SCALE_OUT:-target/scale-run}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
step() { printf '\n==> %s\n' "$*" >&2; }

step "control plane and kwok"
PLACER_E2E_BIN_DIR=$(bash tests/cluster/build.sh | tail -n 1)
PLACER_E2E_KWOK_DIR=$(bash tests/cluster/build-kwok.sh | tail -n 1)
export PLACER_E2E_BIN_DIR PLACER_E2E_KWOK_DIR

export PLACER_SCALE_CONFIGS=${SCALE_CONFIGS:-abcdefghi}
step "release placer"
cargo build --release --locked --bin placer
export PLACER_E2E_PLACER_BIN="$PWD/target/release/placer"
# The floor only serves (e): no build on a 2-core machine for runs without it.
if [[ $PLACER_SCALE_CONFIGS == *e* ]]; then
  step "the floor"
  CARGO_TARGET_DIR="$PWD/target/floor" cargo build --release --manifest-path ../shared/tools/floor/Cargo.toml
  export PLACER_SCALE_FLOOR_BIN="$PWD/target/floor/release/floor"
fi
export PLACER_SCALE_WORKLOADS=${SCALE_WORKLOADS:-basic,precreated}
export PLACER_SCALE_WINDOW=${SCALE_WINDOW:-120}
# Configurations of the unschedulable workload (default: SCALE_CONFIGS).
export PLACER_SCALE_UNSCHEDULABLE_CONFIGS=${SCALE_UNSCHEDULABLE_CONFIGS:-$PLACER_SCALE_CONFIGS}
export PLACER_E2E_RUST_LOG=${PLACER_E2E_RUST_LOG:-info}

{
  bash scripts/machine.sh
  echo "kube-scheduler: $("$PLACER_E2E_BIN_DIR/kube-scheduler" --version 2>&1 | head -1)"
  echo "kwok: $("$PLACER_E2E_KWOK_DIR/kwok" --version 2>&1 | head -1)"
} | tee "$OUT/machine.txt" >&2

for size in $SIZES; do
  step "scale $size (configurations $PLACER_SCALE_CONFIGS, workloads $PLACER_SCALE_WORKLOADS)"
  echo "load average before $size: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2
  PLACER_SCALE="$size" PLACER_SCALE_OUT="$OUT/$size.md" \
    timeout "${SCALE_TIMEOUT:-3600}" cargo test --release --locked --test e2e scale:: -- \
    --nocapture --test-threads=1 2>&1 | tee "$OUT/$size.log" >&2
  echo "load average after $size: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt" >&2
done

step "summary"
cat "$OUT/machine.txt"
for size in $SIZES; do cat "$OUT/$size.md"; done
