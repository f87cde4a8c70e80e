#!/usr/bin/env bash
# The search's evaluation cache (search/evalcache.c; docs/experiments.md,
# "Evaluation cache"). Usage:
#   benchmarks/bench_evalcache.sh BUILD_DIR [SEEDS]
# For each pair below and seed 1..SEEDS (default 3): one fixed-budget search
# (`--budget B --time-limit 0`, about 10 s of search) with the cache and one
# with --no-eval-cache, the two side by side (two cores). Checks that both
# write the same plan file (the cache must not change the chain), and prints
# how many proposals the cache decided out of those the search without it
# simulated or cut (each one evaluator call saved), and the user CPU seconds
# of both runs and their ratio (noisy on a shared machine: the count is the
# exact figure, the time its noisy consequence).
set -eu
build=${1:?usage: bench_evalcache.sh BUILD_DIR [SEEDS]}
seeds=${2:-3}
bin=$build/simsearch
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-13s %-8s %4s %6s %s\n' model topology seed budget \
  "plan   cached/(sims+cuts)   cpu_off cpu_on ratio"
for pair in rnntc:p100x16:6000 rnnlm:p100x16:3000 nmt:p100x16:1000 rnntc:k80x64:1500 \
            rnnlm:k80x64:800 nmt:k80x64:250 inception_v3:p100x16:600; do
  IFS=: read -r model topo budget <<<"$pair"
  for seed in $(seq 1 "$seeds"); do
    for arm in on off; do
      flag=$([ "$arm" = off ] && echo --no-eval-cache || true)
      /usr/bin/time -f "%U" -o "$tmp/$arm.time" "$bin" --topology "topologies/$topo.json" \
        --model "$model" --budget "$budget" --time-limit 0 --seed "$seed" --json \
        --out "$tmp/$arm.plan" $flag >"$tmp/$arm.json" &
    done
    wait
    same=$(cmp -s "$tmp/on.plan" "$tmp/off.plan" && echo same || echo DIFFERENT)
    python3 - "$model" "$topo" "$seed" "$budget" "$same" "$tmp" <<'PY'
import json, sys
model, topo, seed, budget, same, tmp = sys.argv[1:]
on = json.load(open(tmp + "/on.json"))["search"]
off = json.load(open(tmp + "/off.json"))["search"]
t_on = float(open(tmp + "/on.time").read().split()[-1])
t_off = float(open(tmp + "/off.time").read().split()[-1])
n = off["evaluations"] + off["cut"]
print("%-13s %-8s %4s %6s %-9s %5d/%-5d %5.1f%%   %7.2f %6.2f %5.2fx" % (
    model, topo, seed, budget, same, on["cached"], n, 100.0 * on["cached"] / n,
    t_off, t_on, t_off / t_on))
PY
  done
done
