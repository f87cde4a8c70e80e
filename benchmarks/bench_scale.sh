#!/usr/bin/env bash
# Scale benchmark for benchmarks/RESULTS.md ("Scale"): how long judging one
# plan takes, and what the full simulation (the oracle) costs, on LLM plans
# of 64 to 1,024 GPUs and on FlexFlow's six models. Usage:
#   benchmarks/bench_scale.sh BUILD_DIR [--full] [--random N]
# Per case: the whole `simsearch simulate` process with the default
# evaluator (auto) — wall and CPU seconds, peak RSS, the evaluator it chose,
# tasks simulated, device classes — and, where the hierarchical evaluator
# applies, bench_hier's warm evaluation (median of 21 in-process repeats with
# memoized blocks). --full adds `simulate --evaluator full` (wall, CPU, peak
# RSS, tasks) and the difference of the iteration times: the 175B plan's
# full run takes ~40 s and ~7.5 GiB. --random N (default 20): N random valid
# plans of the 175B grid (tp, pp, dp, micro-batch size, recompute; seeded,
# so the same plans every run). Prints one markdown table of the named
# cases and a summary of the random plans (with the Megatron plan: the
# issue's "median of the 175B plans"); --detail FILE writes the random
# plans' rows to FILE (benchmarks/scale-plans.md).
set -eu
build=${1:?usage: bench_scale.sh BUILD_DIR [--full] [--random N]}
shift
full=0
nrand=20
detail=
while [ $# -gt 0 ]; do
  case $1 in
    --full) full=1 ;;
    --random) nrand=${2:?--random N}; shift ;;
    --detail) detail=${2:?--detail FILE}; shift ;;
    *) echo "bench_scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bin=$build/simsearch
cd "$(dirname "$0")/.."
cmake --build "$build" --target simsearch bench_hier -j2 >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

g175="--model gpt:layers=96,hidden=12288,heads=96,seq=2048 --batch 1536 --topology topologies/dgx-a100.json --nodes 128"
g39="--model gpt:layers=48,hidden=8192,heads=64,seq=2048 --batch 1536 --topology topologies/dgx-a100.json --nodes 64"
g1t="--model gpt:layers=128,hidden=25600,heads=160,seq=2048 --batch 3072 --topology topologies/dgx-a100.json --nodes 384"
bert="--model bert:layers=24,hidden=1024,heads=16,seq=512 --batch 512 --topology topologies/dgx-a100.json --nodes 8"
# past 4,096 devices (issue 27): an 8-layer GPT on 512 and 2,048 DGX A100 nodes;
# on 16,384 devices both are judged hierarchically (Megatron ~3.7 s CPU,
# 0.44 GB; data parallelism 11-14 s CPU, 1.46 GB, on 2 shared cores)
g8="--model gpt:layers=8,hidden=4096,heads=32,seq=2048 --topology topologies/dgx-a100.json"
cases=(
  "GPT-3 175B / 1,024|$g175|megatron:tp=8,pp=16,dp=8,mb=192,recompute=full|$full"
  "GPT 1T / 3,072|$g1t|megatron:tp=8,pp=64,dp=6,mb=128,recompute=full|$full"
  "GPT 39.1B / 512|$g39|megatron:tp=8,pp=8,dp=8,mb=96,recompute=full|$full"
  "BERT-large / 64|$bert|megatron:tp=2,pp=4,dp=8,mb=16|$full"
  "GPT 8 x 4096 / 4,096|$g8 --nodes 512 --batch 2048|megatron:tp=8,pp=8,dp=64|0"
  "GPT 8 x 4096 / 16,384|$g8 --nodes 2048 --batch 8192|megatron:tp=8,pp=8,dp=256|0"
  "GPT 8 x 4096 / 16,384 DP|$g8 --nodes 2048 --batch 131072|data-parallel|0"
)
for m in alexnet inception_v3 resnet101 rnntc rnnlm nmt; do
  cases+=("$m / 16 P100|--model $m --topology topologies/p100x16.json|data-parallel|$full")
done
# random plans of the 175B grid: tp | heads, pp | layers, dp = 1024/(tp pp)
# dividing the batch, micro-batch size s with m = 1536/(dp s) >= pp
RANDOM=19
n=0
tries=0
while [ "$n" -lt "$nrand" ] && [ "$tries" -lt 10000 ]; do
  tries=$((tries + 1))
  tps=(1 2 4 8); pps=(1 2 4 8 16 32); ss=(1 2 4); rcs=(full selective)
  tp=${tps[RANDOM % 4]}; pp=${pps[RANDOM % 6]}; s=${ss[RANDOM % 3]}; rc=${rcs[RANDOM % 2]}
  dp=$((1024 / (tp * pp)))
  [ $((1536 % (dp * s))) -eq 0 ] || continue
  mb=$((1536 / (dp * s)))
  [ "$mb" -ge "$pp" ] || continue
  cases+=("175B random $((n + 1))|$g175|megatron:tp=$tp,pp=$pp,dp=$dp,mbs=$s,recompute=$rc|0")
  n=$((n + 1))
done

timed() { # out-file, command...: stdout to out-file, "wall cpu rss_kb" to stdout
  local out=$1
  shift
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" >"$out.out" 2>"$out.err" || return 1
  read -r w u s k <"$tmp/time"
  echo "$w $(printf '%.2f' "$(echo "$u + $s" | bc)") $k"
}
gib() { printf '%.2f' "$(echo "scale=4; $1 / 1048576" | bc)"; }
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

head='| case | plan | evaluator | tasks simulated | classes | simulate wall s | CPU s | peak RSS GiB | warm ms (CPU) | full wall s | full CPU s | full RSS GiB | full tasks | auto vs full |
|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
echo "$head"
echo "$head" >"$tmp/rand.md"
: >"$tmp/grid.md"
for c in "${cases[@]}"; do
  IFS='|' read -r name args plan dofull <<<"$c"
  # shellcheck disable=SC2086
  if ! t=$(timed "$tmp/a" "$bin" simulate $args --plan "$plan" --json); then
    row="| $name | \`$plan\` | failed: $(head -c 200 "$tmp/a.err" | tr '\n|' '  ') |"
    case $name in 175B\ random*) echo "$row" >>"$tmp/rand.md" ;; *) echo "$row" ;; esac
    continue
  fi
  mv "$tmp/a.out" "$tmp/a.json"
  read -r w cpu k <<<"$t"
  ev=$(field "$tmp/a.json" evaluator)
  warm="-"
  if [ "$ev" = hierarchical ]; then
    # shellcheck disable=SC2086
    if "$build/bench_hier" $args --plan "$plan" >"$tmp/h" 2>&1; then
      warm=$(sed -n 's/.*warm median .* ms wall (min .*), \([0-9.]*\) ms CPU.*/\1/p' "$tmp/h")
    fi
  fi
  row="| $name | \`$plan\` | $ev | $(field "$tmp/a.json" tasks_simulated) | $(field "$tmp/a.json" symmetry_classes) | $w | $cpu | $(gib "$k") | $warm"
  if [ "$dofull" = 1 ]; then
    # shellcheck disable=SC2086
    if ft=$(timed "$tmp/f" "$bin" simulate $args --plan "$plan" --json --evaluator full); then
      mv "$tmp/f.out" "$tmp/f.json"
      read -r fw fcpu fk <<<"$ft"
      diff=$(python3 -c "import json,sys; a,f=(json.load(open(x))['iteration_time_ms'] for x in sys.argv[1:]); print('%+.3f%%' % (100*(a/f-1)))" "$tmp/a.json" "$tmp/f.json")
      row="$row | $fw | $fcpu | $(gib "$fk") | $(field "$tmp/f.json" tasks) | $diff |"
    else
      row="$row | failed | | | | |"
    fi
  else
    row="$row | | | | | |"
  fi
  case $name in
    175B\ random*) echo "$row" >>"$tmp/rand.md" ;;
    *) echo "$row" ;;
  esac
  case $name in GPT-3\ 175B*|175B\ random*) echo "$row" >>"$tmp/grid.md" ;; esac
done
[ -n "$detail" ] && cp "$tmp/rand.md" "$detail"
# the summary of the 175B grid: the Megatron plan and the random ones
python3 - "$tmp/grid.md" "$nrand" "${detail:-}" <<'PY'
import statistics, sys
rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in open(sys.argv[1])]
ok = [r for r in rows if len(r) >= 9 and r[2] in ("hierarchical", "symmetry", "full")]
if not ok:
    print("\nNo plan of the 175B grid was judged."); sys.exit()
cpu = sorted((float(r[6]), r[1]) for r in ok)
warm = sorted(float(r[8]) for r in ok if r[8] not in ("-", ""))
evs = {}
for r in ok:
    evs[r[2]] = evs.get(r[2], 0) + 1
rss = max(float(r[7]) for r in ok)
print("\nThe 175B / 1,024 grid, the Megatron plan and %s random plans (tp 1-8, pp 1-32, micro-batch"
      " size 1-4, full or selective recompute; seeded%s): %d judged (%s), %d failed; whole"
      " `simulate` process median %.2f s CPU (max %.2f s, %s); warm median %s ms (max %s ms);"
      " peak RSS <= %.2f GiB." % (
          sys.argv[2], ", rows in " + sys.argv[3] if sys.argv[3] else "", len(ok),
          ", ".join("%s %d" % kv for kv in sorted(evs.items())), len(rows) - len(ok),
          statistics.median(c for c, _ in cpu), cpu[-1][0], cpu[-1][1],
          "%.3f" % statistics.median(warm) if warm else "-", "%.3f" % warm[-1] if warm else "-",
          rss))
PY
