#!/usr/bin/env bash
# Reproduces every number in docs/benchmarks.md, from a clean checkout:
#
#   1. builds the release binary and the criterion bench (benches/request_path.rs);
#   2. runs the criterion benchmarks: one scheduling cycle (/filter then
#      /prioritize, each decode → evaluate → encode, no socket) for the names
#      and full-nodes shapes at 500 / 5,000 / 15,000 nodes, 0 and 150,000 pods;
#   3. times 1,000 single 5,000-name cycles with Instant (p50/p90/p99), and the
#      stages of that cycle (where the time goes);
#   4. counts the instructions of one cycle with callgrind at 0 and 150,000
#      pods (the pod-independence check, immune to other load on the machine);
#   5. generates a 5,000-node, 150,000-pod snapshot, starts
#      `placer serve --snapshot` on 127.0.0.1, and loads /filter and
#      /prioritize with wrk (500 names per request), reading the server-side
#      request_duration histogram from /metrics when the build has it;
#   6. prints a summary (also written to $OUT/summary.md).
#
# Everything stays on this machine: the load generator talks to 127.0.0.1 only,
# every run is bounded in time, and the server is stopped at the end.
#
# Knobs (environment): BENCH_OUT (results, default target/bench-run),
# BENCH_DURATION (per wrk run, default 10s), BENCH_PORT (default 18888),
# BENCH_CONNECTIONS (wrk connections of the throughput runs, default 4),
# BENCH_SKIP_CRITERION=1 (reuse target/criterion from an earlier run),
# BENCH_SKIP_ICOUNT=1 (skip the callgrind step).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${BENCH_OUT:-target/bench-run}
DURATION=${BENCH_DURATION:-10s}
PORT=${BENCH_PORT:-18888}
CONNS=${BENCH_CONNECTIONS:-4}
URL="http://127.0.0.1:${PORT}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

step() { printf '\n==> %s\n' "$*" >&2; }

# --- tools -------------------------------------------------------------------
if ! command -v wrk >/dev/null; then
  step "installing wrk (Debian package)"
  apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
for tool in curl python3 wrk; do
  command -v "$tool" >/dev/null || { echo "bench.sh needs $tool" >&2; exit 1; }
done

# --- machine -----------------------------------------------------------------
{
  bash scripts/machine.sh
  echo "wrk: $(wrk --version 2>&1 | head -1 | awk '{print $2}')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt" >&2

# --- build -------------------------------------------------------------------
step "building (release binary and bench)"
cargo build --release --locked --bin placer
BENCH_BIN=$(cargo bench --locked --bench request_path --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*request_path[^"]*"' | tail -1 | cut -d'"' -f4)
[ -x "$BENCH_BIN" ] || { echo "could not find the request_path bench binary" >&2; exit 1; }

# --- criterion ---------------------------------------------------------------
if [ "${BENCH_SKIP_CRITERION:-0}" != 1 ]; then
  step "criterion: cycle/{names,full-nodes} × nodes × pods, parts of the 5,000-name cycle"
  echo "load average before criterion: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
  cargo bench --locked --bench request_path 2>&1 | tee "$OUT/criterion.log" >&2
fi

# --- per-cycle latency distribution and stage breakdown ----------------------
step "latency distribution: single cycles timed with Instant"
echo "load average before latency: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
PLACER_BENCH=latency PLACER_BENCH_ITERS=1000 "$BENCH_BIN" | tee "$OUT/latency.txt" >&2
step "stage breakdown of the 5,000-name cycle"
PLACER_BENCH=breakdown PLACER_BENCH_ITERS=300 "$BENCH_BIN" | tee "$OUT/breakdown.txt" >&2

# --- instruction counts: independent of the machine's other load -------------
# callgrind counts the instructions of the whole process (every thread); the
# difference between 12 and 2 cycles over 10 is the cost of one cycle, setup
# excluded. Compares 0 and 150,000 pods without timing noise.
if [ "${BENCH_SKIP_ICOUNT:-0}" != 1 ] && command -v valgrind >/dev/null; then
  step "instruction counts per cycle (callgrind), 0 vs 150,000 pods"
  icount() { # nodes pods iterations
    PLACER_BENCH=loop PLACER_BENCH_NODES=$1 PLACER_BENCH_PODS=$2 PLACER_BENCH_ITERS=$3 \
      valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BENCH_BIN" 2>&1 |
      awk '/refs:/ {gsub(",", "", $NF); print $NF}'
  }
  : >"$OUT/icount.txt"
  for case in "500 0" "500 150000" "5000 0" "5000 150000"; do
    set -- $case
    a=$(icount "$1" "$2" 2)
    b=$(icount "$1" "$2" 12)
    echo "names nodes=$1 pods=$2 instructions/cycle=$(((b - a) / 10))" | tee -a "$OUT/icount.txt" >&2
  done
fi

# --- load run against the real listener ---------------------------------------
step "fixtures: 5,000-node / 150,000-pod snapshot and 500-name bodies"
PLACER_BENCH=fixtures PLACER_BENCH_OUT="$OUT/fixtures" "$BENCH_BIN" >&2

step "starting placer serve on 127.0.0.1:$PORT"
start=$(date +%s.%N)
RUST_LOG=warn target/release/placer serve --policy policy.yaml \
  --snapshot "$OUT/fixtures/snapshot.json" --listen "127.0.0.1:$PORT" \
  >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 1 600); do
  if ! kill -0 "$SERVER" 2>/dev/null; then
    echo "placer exited during start-up:" >&2; cat "$OUT/server.log" >&2; exit 1
  fi
  if curl -fsS "$URL/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.5
done
[ "$ready" = 1 ] || { echo "placer not ready after 300 s" >&2; exit 1; }
{
  echo "server start-up (snapshot load) seconds: $(python3 -c "print(round($(date +%s.%N) - $start, 1))")"
  echo "server RSS after load: $(awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$SERVER/status")"
} | tee -a "$OUT/machine.txt" >&2

# Sanity: both verbs answer 200 with a non-empty result.
for verb in filter prioritize; do
  code=$(curl -s -o "$OUT/answer-$verb.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$OUT/fixtures/names-500.json" "$URL/$verb")
  [ "$code" = 200 ] || { echo "/$verb answered $code: $(head -c 300 "$OUT/answer-$verb.json")" >&2; exit 1; }
done

cat >"$OUT/post.lua" <<'LUA'
-- POSTs the file named by $BODY as JSON.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA

scrape() { curl -fsS "$URL/metrics" >"$1" 2>/dev/null || : >"$1"; }

run_wrk() { # name verb connections body
  local name=$1 verb=$2 conns=$3 body=$4
  step "wrk: $name (/$verb, $conns connection(s), $DURATION)"
  scrape "$OUT/metrics-$name.before"
  BODY="$body" wrk -t1 -c"$conns" -d"$DURATION" --timeout 5s --latency \
    -s "$OUT/post.lua" "$URL/$verb" | tee "$OUT/wrk-$name.txt" >&2
  scrape "$OUT/metrics-$name.after"
}

echo "load average before load run: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
run_wrk filter-500-c1 filter 1 "$OUT/fixtures/names-500.json"
run_wrk filter-500-c$CONNS filter "$CONNS" "$OUT/fixtures/names-500.json"
run_wrk prioritize-500-c1 prioritize 1 "$OUT/fixtures/names-500.json"
run_wrk prioritize-500-c$CONNS prioritize "$CONNS" "$OUT/fixtures/names-500.json"
run_wrk filter-5000-c1 filter 1 "$OUT/fixtures/names-5000.json"
run_wrk prioritize-5000-c1 prioritize 1 "$OUT/fixtures/names-5000.json"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"

kill "$SERVER" 2>/dev/null || true
wait "$SERVER" 2>/dev/null || true
trap - EXIT

# --- summary -----------------------------------------------------------------
step "summary"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import glob, json, os, re, sys

out = sys.argv[1]

def fmt(ns):
    us = ns / 1000.0
    if us >= 10000:
        return f"{us / 1000:.1f} ms"
    if us >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.0f} µs"

print("## Machine\n")
print("```")
print(open(os.path.join(out, "machine.txt")).read().rstrip())
print("```\n")

print("## Criterion: one cycle (/filter + /prioritize: decode, evaluate, encode)\n")
print("| case | median | 95% CI upper | 150k pods / 0 pods |")
print("| --- | ---: | ---: | ---: |")
rows = {}
for bench in glob.glob("target/criterion/**/new/benchmark.json", recursive=True):
    meta = json.load(open(bench))
    est = json.load(open(os.path.join(os.path.dirname(bench), "estimates.json")))
    rows[meta["full_id"]] = (est["median"]["point_estimate"], est["median"]["confidence_interval"]["upper_bound"])

def key(k):
    nums = [int(x) for x in re.findall(r"=(\d+)", k)]
    return (not k.startswith("cycle/names"), not k.startswith("cycle"), nums)

for k in sorted(rows, key=key):
    med, hi = rows[k]
    ratio = ""
    m = re.match(r"(.*)/pods=150000$", k)
    if m and f"{m.group(1)}/pods=0" in rows and k.startswith("cycle"):
        ratio = f"{med / rows[m.group(1) + '/pods=0'][0]:.2f}"
    print(f"| {k} | {fmt(med)} | {fmt(hi)} | {ratio} |")

print("\n## Single cycles timed with Instant (p99 \"server time\" without the socket)\n")
print("```")
print(open(os.path.join(out, "latency.txt")).read().rstrip())
print("```\n")
print("```")
print(open(os.path.join(out, "breakdown.txt")).read().rstrip())
print("```\n")

icount = os.path.join(out, "icount.txt")
if os.path.exists(icount):
    print("## Instructions per cycle (callgrind; independent of other load on the machine)\n")
    print("| case | instructions/cycle | per node |")
    print("| --- | ---: | ---: |")
    for line in open(icount):
        m = re.match(r"names nodes=(\d+) pods=(\d+) instructions/cycle=(\d+)", line)
        if m:
            n, p, i = (int(x) for x in m.groups())
            print(f"| names, {n} nodes, {p} pods | {i:,} | {i // n:,} |")
    print()

def hist_quantiles(before, after, verb):
    """Approximate quantiles from the server's request_duration histogram deltas."""
    def parse(path):
        b = {}
        if not os.path.exists(path):
            return b
        for line in open(path):
            m = re.match(r'placer_request_duration_seconds_bucket\{(.*)\} (\S+)', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels.get("verb") != verb or labels.get("outcome") != "success":
                continue
            le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            b[le] = float(m.group(2))
        return b
    a, z = parse(before), parse(after)
    if not z:
        return None
    buckets = sorted((le, z[le] - a.get(le, 0.0)) for le in z)
    total = buckets[-1][1]
    if total <= 0:
        return None
    res = []
    for q in (0.5, 0.99):
        rank = q * total
        prev_le, prev_c = 0.0, 0.0
        for le, c in buckets:
            if c >= rank:
                if le == float("inf"):
                    res.append(prev_le)
                else:
                    res.append(prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-9))
                break
            prev_le, prev_c = le, c
    return res, int(total)

def unit(s):
    m = re.match(r"([\d.]+)(us|ms|s)", s)
    v = float(m.group(1))
    return v * {"us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]

print("## Load run: placer serve on 127.0.0.1, wrk (client-side latency)\n")
print("| run | requests/s | p50 | p99 | non-2xx | server p50 / p99 (histogram) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for path in sorted(glob.glob(os.path.join(out, "wrk-*.txt"))):
    name = os.path.basename(path)[4:-4]
    text = open(path).read()
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)
    p50 = re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1)
    p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    verb = name.split("-")[0]
    h = hist_quantiles(os.path.join(out, f"metrics-{name}.before"), os.path.join(out, f"metrics-{name}.after"), verb)
    server = f"{fmt(h[0][0] * 1e9)} / {fmt(h[0][1] * 1e9)}" if h else "n/a (no /metrics)"
    print(f"| {name} | {float(rps):.0f} | {fmt(unit(p50))} | {fmt(unit(p99))} | {bad.group(1) if bad else 0} | {server} |")
PY
