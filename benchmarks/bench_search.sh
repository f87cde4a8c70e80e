#!/usr/bin/env bash
# Search benchmarks for benchmarks/RESULTS.md ("Search"). Usage:
#   benchmarks/bench_search.sh BUILD_DIR [SECONDS] [DELTA_PROPOSALS]
# For each of FlexFlow's six models on p100x16 and k80x64: one search of
# SECONDS (default 20) seconds with seed 1, recording its best-so-far curve;
# prints data-parallel, expert and best iteration times, the speedups, the
# proposals and simulations per second, and the time at which the curve
# first came within 1% of the run's final best (the best a 10x longer search
# than a SECONDS/10 search finds). Then delta vs full simulation per
# evaluation on the graphs of >= 10,000 tasks (DELTA_PROPOSALS random
# one-op proposals each, default 40). Single-threaded; runs one at a time.
set -eu
build=${1:?usage: bench_search.sh BUILD_DIR [SECONDS] [DELTA_PROPOSALS]}
secs=${2:-20}
nd=${3:-40}
bin=$build/bench_search
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-13s %-8s %10s %10s %10s %7s %7s %9s %8s %8s\n' model topology dp_ms expert_ms best_ms \
  vs_dp vs_exp props/s sims/s within1%_s
for topo in p100x16 k80x64; do
  for model in alexnet inception_v3 resnet101 rnntc rnnlm nmt; do
    "$bin" trace "$model" "topologies/$topo.json" "$secs" 1 >"$tmp/curve" 2>"$tmp/line"
    python3 - "$model" "$topo" "$tmp/curve" "$tmp/line" "$secs" <<'PY'
import sys
model, topo, curve, line, secs = sys.argv[1:6]
pts = [tuple(map(float, l.split())) for l in open(curve) if l.strip()]
final = pts[-1][1]
within = next(t for t, b in pts if b <= 1.01 * final)
f = open(line).read().split()
props, sims, dp, ex = int(f[0]), int(f[1]), float(f[2]), float(f[3])
print("%-13s %-8s %10.2f %10.2f %10.2f %6.2fx %6.2fx %9.0f %8.0f %8.2f" % (
    model, topo, dp, ex, final, dp / final, ex / final, props / float(secs),
    sims / float(secs), within))
PY
  done
done
echo
echo "delta vs full simulation per evaluation (median of $nd proposals):"
for model in inception_v3 resnet101 nmt; do
  "$bin" delta "$model" topologies/p100x16.json "$nd"
done
