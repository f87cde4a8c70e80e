#!/usr/bin/env bash
# Search benchmarks for benchmarks/RESULTS.md ("Search"). Usage:
#   benchmarks/bench_search.sh BUILD_DIR [SECONDS] [SEEDS] [REF_SECONDS]
# For each of FlexFlow's six models on p100x16 and k80x64: SEEDS (default 3)
# searches of SECONDS (default 20) seconds, seeds 1..SEEDS, recording their
# best-so-far curves. The reference is the best plan any of them found (the
# best known: SEEDS x SECONDS seconds of search); for every run, the time at
# which its curve first came within 1% of that reference ("inf" if never).
# Prints data-parallel, expert and the median final iteration time, the
# speedups of the best known plan, proposals and simulations per second
# (medians), the median time to within 1%, and how many runs got there in
# at most SECONDS/2 seconds (the issue's target with SECONDS = 20: within 1%
# in <= 10 s). (Before delta simulation was removed, docs/search.md, a third
# argument set the proposals of its comparison: SEEDS and REF_SECONDS moved
# up one place.)
# With REF_SECONDS > 0 one more search of that length per pair (seed 11) joins
# the reference (the issue's "10x longer search": REF_SECONDS = 10 x 10).
# Single-threaded; runs one at a time. TOPOLOGIES (default "p100x16 k80x64")
# picks the topologies, e.g. to run each in its own process.
set -eu
build=${1:?usage: bench_search.sh BUILD_DIR [SECONDS] [SEEDS] [REF_SECONDS]}
secs=${2:-20}
seeds=${3:-3}
refsecs=${4:-0}
bin=$build/bench_search
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-13s %-8s %9s %9s %9s %9s %7s %7s %8s %7s %10s %6s\n' model topology dp_ms expert_ms \
  median_ms best_ms vs_dp vs_exp props/s sims/s within1%_s "<=T/2"
for topo in ${TOPOLOGIES:-p100x16 k80x64}; do
  for model in alexnet inception_v3 resnet101 rnntc rnnlm nmt; do
    for seed in $(seq 1 "$seeds"); do
      "$bin" trace "$model" "topologies/$topo.json" "$secs" "$seed" >"$tmp/curve.$seed" \
        2>"$tmp/line.$seed"
    done
    rm -f "$tmp/ref"
    if [ "$refsecs" != 0 ]; then
      "$bin" trace "$model" "topologies/$topo.json" "$refsecs" 11 >"$tmp/ref" 2>/dev/null
    fi
    python3 - "$model" "$topo" "$tmp" "$secs" "$seeds" <<'PY'
import os, statistics, sys
model, topo, tmp, secs, seeds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
runs = []
for s in range(1, seeds + 1):
    pts = [tuple(map(float, l.split())) for l in open("%s/curve.%d" % (tmp, s)) if l.strip()]
    f = open("%s/line.%d" % (tmp, s)).read().split()
    runs.append((pts, int(f[0]), int(f[1]), float(f[2]), float(f[3])))
ref = min(r[0][-1][1] for r in runs)
if os.path.exists("%s/ref" % tmp):
    ref = min([ref] + [float(l.split()[1]) for l in open("%s/ref" % tmp) if l.strip()])
within = [next((t for t, b in r[0] if b <= 1.01 * ref), float("inf")) for r in runs]
dp, ex = runs[0][3], runs[0][4]
med = statistics.median(r[0][-1][1] for r in runs)
print("%-13s %-8s %9.2f %9.2f %9.2f %9.2f %6.2fx %6.2fx %8.0f %7.0f %10.2f %4d/%d" % (
    model, topo, dp, ex, med, ref, dp / ref, ex / ref,
    statistics.median(r[1] for r in runs) / secs, statistics.median(r[2] for r in runs) / secs,
    statistics.median(within), sum(w <= secs / 2 for w in within), seeds))
PY
  done
done
