#!/usr/bin/env bash
# Compares placer's global allocators side by side (docs/benchmarks.md, "Allocator"):
# the system allocator (glibc malloc), mimalloc and jemalloc, each a release build
# (`--features mimalloc` / `--features tikv-jemallocator`). All three serve the same
# snapshot at once on 127.0.0.1; the floor client's `pair` alternates batches between
# the system build and each of the others, so machine noise hits both sides alike.
# Prints the pair lines (A = system) and each server's RSS and CPU-seconds.
#
# Knobs: FIXTURES (a dir with snapshot.json and names-{500,5000}.json, as
# `PLACER_BENCH=fixtures` writes them; default target/loopback/p150k), ROUNDS (10),
# BIN_DIR (prebuilt placer-{system,mimalloc,jemalloc}; default: build them),
# FLOOR (target/floor/release/floor). Bounded: each pair run is ROUNDS x 100 requests.
set -euo pipefail
cd "$(dirname "$0")/.."

FIXTURES=${FIXTURES:-target/loopback/p150k}
ROUNDS=${ROUNDS:-10}
FLOOR=${FLOOR:-target/floor/release/floor}
BIN_DIR=${BIN_DIR:-}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ -z "$BIN_DIR" ]; then
  BIN_DIR=target/alloc
  mkdir -p "$BIN_DIR"
  for v in system:"" mimalloc:"--features mimalloc" jemalloc:"--features tikv-jemallocator"; do
    # shellcheck disable=SC2086
    cargo build --release --bin placer ${v#*:}
    cp target/release/placer "$BIN_DIR/placer-${v%%:*}"
  done
fi

ready() { for _ in $(seq 180); do curl -sf "$1/readyz" >/dev/null && return; sleep 1; done; exit 1; }
cpu_seconds() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
rss() { grep -E 'VmHWM|VmRSS' "/proc/$1/status" | tr -s ' ' | paste -sd' '; }

declare -A PID PORT=([system]=18821 [mimalloc]=18822 [jemalloc]=18823)
for v in system mimalloc jemalloc; do
  "$BIN_DIR/placer-$v" serve --snapshot "$FIXTURES/snapshot.json" --policy policy.yaml \
    --listen "127.0.0.1:${PORT[$v]}" >/dev/null 2>&1 &
  PID[$v]=$!; PIDS+=($!)
done
for v in system mimalloc jemalloc; do ready "http://127.0.0.1:${PORT[$v]}"; done
for v in system mimalloc jemalloc; do echo "$v after load: $(rss "${PID[$v]}") cpu $(cpu_seconds "${PID[$v]}") s"; done

declare -A BEFORE
for v in system mimalloc jemalloc; do BEFORE[$v]=$(cpu_seconds "${PID[$v]}"); done
for other in mimalloc jemalloc; do
  for n in 500 5000; do
    for verb in filter prioritize; do
      "$FLOOR" same "http://127.0.0.1:${PORT[system]}" "http://127.0.0.1:${PORT[$other]}" \
        "$FIXTURES/names-$n.json" "$verb" >/dev/null
      echo "system vs $other, $n names, $verb: $("$FLOOR" pair "http://127.0.0.1:${PORT[system]}" \
        "http://127.0.0.1:${PORT[$other]}" "$FIXTURES/names-$n.json" "$verb" "$ROUNDS")"
    done
  done
done
# The system build is side A of both comparisons, so it served twice as many requests.
for v in system mimalloc jemalloc; do
  echo "$v after requests: $(rss "${PID[$v]}") request cpu $(awk -v a="${BEFORE[$v]}" -v b="$(cpu_seconds "${PID[$v]}")" 'BEGIN {print b - a}') s"
done
