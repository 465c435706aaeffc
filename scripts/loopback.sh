#!/usr/bin/env bash
# placer against the cost floor over loopback (docs/benchmarks.md, "Over
# loopback against the floor"): both verbs, 500 and 5,000 NodeNames, full
# Nodes, flat cost (0 pods, 60 labels per node) and RSS, side by side in one
# run. Everything listens on 127.0.0.1 and is stopped at the end.
#
# Needs the shared floor tool built (FLOOR, default target/floor/release/floor;
# see its README) and perf-free quiet time: `pair` alternates batches of 100
# requests, so machine noise hits both sides alike, but a loaded machine still
# widens the p99s.
#
# Knobs: LOOPBACK_OUT (default target/loopback), ROUNDS (default 20),
# FULL_ROUNDS (default 3), SKIP_FLAT=1.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${LOOPBACK_OUT:-target/loopback}
FLOOR=${FLOOR:-target/floor/release/floor}
ROUNDS=${ROUNDS:-20}
FULL_ROUNDS=${FULL_ROUNDS:-3}
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

cargo build --release
BENCH=$(cargo bench --bench request_path --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*request_path[^"]*\)".*/\1/p' | tail -1)

fixtures() { # DIR PODS EXTRA_LABELS
  [ -f "$1/snapshot.json" ] || PLACER_BENCH=fixtures PLACER_BENCH_OUT=$1 \
    PLACER_BENCH_PODS=$2 PLACER_BENCH_EXTRA_LABELS=$3 "$BENCH" >/dev/null
}

ready() { for _ in $(seq 120); do curl -sf "$1/readyz" >/dev/null && return; sleep 1; done; exit 1; }

# serve DIR PORT: placer on the snapshot, its peak and settled RSS in $OUT.
serve() {
  local name; name=$(basename "$1")
  target/release/placer serve --snapshot "$1/snapshot.json" --policy policy.yaml \
    --listen "127.0.0.1:$2" >"$OUT/placer-$name.log" 2>&1 &
  PIDS+=($!)
  ready "http://127.0.0.1:$2"
  grep -E 'VmHWM|VmRSS' "/proc/$!/status" | tr -s ' ' | paste -sd' ' |
    sed "s/^/$name: /" >>"$OUT/rss.txt"
}

floor_names() { "$FLOOR" floor-serve "$1/snapshot.json" "127.0.0.1:$2" 2>/dev/null & PIDS+=($!); sleep 15; }

# compare PLACER_URL FLOOR_URL BODY ROUNDS: same answers, then the pair.
compare() {
  for v in filter prioritize; do
    "$FLOOR" same "$1" "$2" "$3" "$v" >/dev/null
    "$FLOOR" pair "$1" "$2" "$3" "$v" "$4" | tee -a "$OUT/pairs.txt"
  done
}

: >"$OUT/pairs.txt"; : >"$OUT/rss.txt"
fixtures "$OUT/p150k" 150000 0
serve "$OUT/p150k" 18811
floor_names "$OUT/p150k" 18812
PLACER_BENCH=floor-serve PLACER_BENCH_ADDR=127.0.0.1:18813 "$BENCH" 2>/dev/null & PIDS+=($!)
sleep 20
for n in 500 5000; do compare http://127.0.0.1:18811 http://127.0.0.1:18812 "$OUT/p150k/names-$n.json" "$ROUNDS"; done
for n in 500 5000; do compare http://127.0.0.1:18811 http://127.0.0.1:18813 "$OUT/p150k/full-$n.json" "$FULL_ROUNDS"; done
cleanup; PIDS=()

if [ -z "${SKIP_FLAT:-}" ]; then
  fixtures "$OUT/p0" 0 0
  fixtures "$OUT/l60" 150000 45
  for v in p0 l60; do
    serve "$OUT/$v" 18811
    floor_names "$OUT/$v" 18812
    compare http://127.0.0.1:18811 http://127.0.0.1:18812 "$OUT/$v/names-5000.json" "$ROUNDS"
    cleanup; PIDS=()
  done
fi
echo; cat "$OUT/pairs.txt"; echo; cat "$OUT/rss.txt"
