#!/usr/bin/env bash
# LLM planner benchmark for benchmarks/RESULTS.md ("LLM planner"): per case one
# bench_plan process (search with the Megatron grid baseline, in-process),
# its CPU and wall seconds and peak RSS, the plan found, the grid's best, the
# speedup, MFU, and the paper's / a hand plan simulated. Usage:
#   benchmarks/bench_plan.sh BUILD_DIR [CASES]
# CASES (default "main"): main = GPT-3 175B / 1,024, GPT 1.3B / 8, 1.7B / 32;
# sc21 = Megatron SC'21 Table 1 (1.7B / 32 ... 1T / 3,072, published batch
# sizes and (tp, pp)); sc21big = its 76.1B ... 1T rows; all = main and sc21;
# 175b = the GPT-3 175B row alone; alpa = GPT-39B on 64 GPUs (Alpa's GPT-3
# 39B: 48 layers, hidden 8,192, 64 heads, sequence 1,024, batch 1,024; Alpa
# planned it in 2,393 s). TIME_LIMIT (default 60) is the search's
# wall-clock limit, THREADS (default 1) its threads, BUDGET its proposals,
# LEVEL its --level (default: the highest); NO_GRID=1 skips the grid
# baseline (its columns then read 0).
# Single process at a time.
set -eu
build=${1:?usage: bench_plan.sh BUILD_DIR [main|sc21|all]}
which=${2:-main}
limit=${TIME_LIMIT:-60}
threads=${THREADS:-1}
budget=${BUDGET:-0}
level=${LEVEL:-}
cd "$(dirname "$0")/.."
cmake --build "$build" --target bench_plan -j2 >/dev/null
topo=topologies/dgx-a100.json
main_cases=(
  "GPT-3 175B / 1,024|gpt:layers=96,hidden=12288,heads=96,seq=2048|1536|128|megatron:tp=8,pp=16,dp=8,mb=192,recompute=full"
  "GPT 1.3B / 8|gpt:layers=24,hidden=2048,heads=16,seq=2048|0|1|megatron:tp=1,pp=1,dp=8,mbs=2,distopt=1"
  "GPT 1.7B / 32|gpt:layers=24,hidden=2304,heads=24,seq=2048,vocab=51200|512|4|megatron:tp=1,pp=1,dp=32,mbs=4,recompute=full"
)
# Narayanan et al., SC'21, Table 1: layers, hidden, heads, GPUs, batch, (tp, pp)
sc21_cases=(
  "1.7B / 32|gpt:layers=24,hidden=2304,heads=24,seq=2048|512|4|megatron:tp=1,pp=1,dp=32,mbs=1,recompute=full"
  "3.6B / 64|gpt:layers=30,hidden=3072,heads=32,seq=2048|512|8|megatron:tp=2,pp=1,dp=32,mbs=1,recompute=full"
  "7.5B / 128|gpt:layers=36,hidden=4096,heads=32,seq=2048|512|16|megatron:tp=4,pp=1,dp=32,mbs=1,recompute=full"
  "18.4B / 256|gpt:layers=40,hidden=6144,heads=48,seq=2048|1024|32|megatron:tp=8,pp=1,dp=32,mbs=1,recompute=full"
  "39.1B / 512|gpt:layers=48,hidden=8192,heads=64,seq=2048|1536|64|megatron:tp=8,pp=2,dp=32,mbs=1,recompute=full"
  "76.1B / 1,024|gpt:layers=60,hidden=10240,heads=80,seq=2048|1792|128|megatron:tp=8,pp=4,dp=32,mbs=1,recompute=full"
  "145.6B / 1,536|gpt:layers=80,hidden=12288,heads=96,seq=2048|2304|192|megatron:tp=8,pp=8,dp=24,mbs=1,recompute=full"
  "310.1B / 1,920|gpt:layers=96,hidden=16384,heads=128,seq=2048|2160|240|megatron:tp=8,pp=16,dp=15,mbs=1,recompute=full"
  "1T / 3,072|gpt:layers=128,hidden=25600,heads=160,seq=2048|3072|384|megatron:tp=8,pp=64,dp=6,mbs=1,recompute=full"
)
alpa_cases=(
  "GPT-39B / 64 (Alpa)|gpt:layers=48,hidden=8192,heads=64,seq=1024|1024|8|megatron:tp=8,pp=2,dp=4,mbs=1,recompute=full"
)
case $which in
  main) cases=("${main_cases[@]}") ;;
  sc21) cases=("${sc21_cases[@]}") ;;
  all) cases=("${main_cases[@]}" "${sc21_cases[@]}") ;;
  sc21big) cases=("${sc21_cases[@]:5}") ;;
  175b) cases=("${main_cases[0]}") ;;
  alpa) cases=("${alpa_cases[@]}") ;;
  *) echo "bench_plan.sh: unknown case set $which" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| case | planner CPU s | total wall s | RSS MiB | plan | ms | grid best | grid ms | grid points (judged) | grid CPU s | vs grid | reference | ref ms | MFU |"
echo "|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---|---:|---:|"
for c in "${cases[@]}"; do
  IFS='|' read -r name model batch nodes ref <<<"$c"
  args=(--model "$model" --topology $topo --nodes "$nodes" --threads "$threads"
        --time-limit "$limit" --ref "$ref")
  [ "$batch" != 0 ] && args+=(--batch "$batch")
  [ "$budget" != 0 ] && args+=(--budget "$budget")
  [ -n "$level" ] && args+=(--level "$level")
  [ "${NO_GRID:-0}" = 1 ] && args+=(--no-grid)
  if ! /usr/bin/time -f "%M" -o "$tmp/rss" "$build/bench_plan" "${args[@]}" >"$tmp/out" 2>"$tmp/err"; then
    echo "| $name | failed: $(tail -1 "$tmp/err") |"
    continue
  fi
  line=$(cat "$tmp/out")
  get() { sed -n "s/.* $1=\"\{0,1\}\([^\" ]*\)\"\{0,1\}.*/\1/p" <<<" $line"; }
  rss=$(( $(cat "$tmp/rss") / 1024 ))
  printf '| %s | %s | %s | %s | `%s` | %s | `%s` | %s | %s (%s) | %s | %s | `%s` | %s%s | %s |\n' \
    "$name" "$(get planner_cpu_s)" "$(get search_wall_s)" "$rss" "$(get plan)" "$(get plan_ms)" \
    "$(get grid_plan)" "$(get grid_ms)" "$(get grid_points)" "$(get grid_judged)" "$(get grid_cpu_s)" \
    "$(get speedup_vs_grid)" "$ref" "$(get ref_ms)" "$([ "$(get ref_fits)" = 1 ] || echo ' (does not fit)')" \
    "$(get mfu)"
done
