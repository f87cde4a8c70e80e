#!/usr/bin/env bash
# The issue's convergence target read literally (docs/experiments.md,
# "10 s against 10x longer, seed by seed"). Usage:
#   benchmarks/bench_converge.sh BUILD_DIR [SECONDS] [SEEDS] [MODELS]
# For each model (default: the three RNNs, where data parallelism is not
# optimal) on each of TOPOLOGIES (default "p100x16 k80x64") and each seed
# 1..SEEDS (default 3): one search of SECONDS (default 10) and one of 10 x
# SECONDS with the same seed, one after the other. Prints per pair the two
# final plans of every seed, and how many short searches ended within 1% of
# the long search of their own seed and within 1% of the best long search of
# the pair. Single-threaded; run topologies in separate processes to use
# more cores (TOPOLOGIES=p100x16 ... & TOPOLOGIES=k80x64 ...).
set -eu
build=${1:?usage: bench_converge.sh BUILD_DIR [SECONDS] [SEEDS] [MODELS]}
secs=${2:-10}
seeds=${3:-3}
models=${4:-"rnntc rnnlm nmt"}
bin=$build/bench_search
cd "$(dirname "$0")/.."
long=$(python3 -c "print($secs * 10)")
printf '%-8s %-8s %s\n' model topology "seed: short_ms / long_ms ...  | short within 1% of own long, of best long"
for topo in ${TOPOLOGIES:-p100x16 k80x64}; do
  for model in $models; do
    line=""
    shorts=""
    longs=""
    for seed in $(seq 1 "$seeds"); do
      s=$("$bin" search "$model" "topologies/$topo.json" "$secs" "$seed" | awk '{print $5}')
      l=$("$bin" search "$model" "topologies/$topo.json" "$long" "$seed" | awk '{print $5}')
      line="$line $seed: $s / $l "
      shorts="$shorts $s"
      longs="$longs $l"
    done
    python3 - "$model" "$topo" "$line" "$shorts" "$longs" <<'PY'
import sys
model, topo, line = sys.argv[1], sys.argv[2], sys.argv[3]
s = [float(x) for x in sys.argv[4].split()]
l = [float(x) for x in sys.argv[5].split()]
own = sum(a <= 1.01 * b for a, b in zip(s, l))
best = sum(a <= 1.01 * min(l) for a in s)
print("%-8s %-8s %s | %d/%d, %d/%d" % (model, topo, line.strip(), own, len(s), best, len(s)))
PY
  done
done
