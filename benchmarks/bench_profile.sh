#!/usr/bin/env bash
# benchmarks/bench_profile.sh — the profiler on this machine's CPU: per-
# operator analytic vs measured times and simulate-with-database vs a
# measured single-process iteration, for the MLP and a small fp32 GPT
# (bench_profile.c). Writes the per-operator tables to
# benchmarks/profile-cpu.md and the summary section at the end of
# benchmarks/RESULTS.md (between its markers, replaced on every run).
# BLAS is pinned to one thread; times are process CPU time (the machine is
# shared), medians over ROUNDS interleaved rounds. Exit 1 if an error
# exceeds 10%.
#   benchmarks/bench_profile.sh [--build DIR]   (env ROUNDS, default 15)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
[ "${1:-}" = "--build" ] && build=$2
rounds=${ROUNDS:-15}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target bench_profile simsearch_cli -j "$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1
gpt="gpt:layers=2,hidden=256,heads=4,seq=128,vocab=4000,vocab_pad=0"
"$build/simsearch" model "$gpt" --batch 4 --export "$tmp/gpt.json" >/dev/null
# the CPU kernels run fp32: the same GPT with f32 activations, fp32 Adam
sed -e 's/"bf16"/"f32"/g; s/"mixed"/"fp32"/' "$tmp/gpt.json" >"$tmp/gpt-f32.json"
status=0
{
  echo "# Profiler: per-operator analytic vs measured on this CPU"
  echo
  echo "Written by benchmarks/bench_profile.sh (bench_profile.c); summary in RESULTS.md."
  echo
} >"$tmp/detail.md"
declare -A sum lab
for m in mlp gpt; do
  if [ $m = mlp ]; then spec=mlp; label="mlp (3x1024, batch 64)"; else spec="$tmp/gpt-f32.json"; label="gpt fp32 ($gpt, batch 4)"; fi
  "$build/bench_profile" --model "$spec" --cpu-time --rounds "$rounds" >"$tmp/$m.out" || status=1
  echo "## $label" >>"$tmp/detail.md"
  echo >>"$tmp/detail.md"
  grep -v '^SUMMARY' "$tmp/$m.out" | sed "s|$tmp/gpt-f32.json|gpt-f32|" >>"$tmp/detail.md"
  lab[$m]=$label
  sum[$m]=$(grep '^SUMMARY' "$tmp/$m.out" | cut -d' ' -f2-)
done
cp "$tmp/detail.md" benchmarks/profile-cpu.md
rates=$(grep -m1 '^Device type' "$tmp/mlp.out" | sed 's/^Device type: //')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
{
  echo "<!-- BEGIN profile (benchmarks/bench_profile.sh) -->"
  echo "## Profiler: analytic vs measured on the CPU"
  echo
  echo "Command: \`benchmarks/bench_profile.sh\` (ROUNDS=$rounds); commit $commit; $(date -u +%Y-%m-%d);"
  echo "machine: $(nproc) cores of $cpu, shared with other jobs. BLAS pinned to one thread"
  echo "(OPENBLAS_NUM_THREADS=1), every time is a median over $rounds rounds of process CPU time"
  echo "(preemption by other jobs not counted); each round measures every distinct tile once"
  echo "(cold caches) and then one whole iteration (every op's forward, every backward, the optimizer"
  echo "update), so both see the same load. Device type: $rates."
  echo "Per-operator tables: benchmarks/profile-cpu.md."
  echo
  echo "| model | distinct tiles | sum of ops, analytic / measured ms | measured iteration ms | simulated with profile DB ms (error) | simulated analytic ms (error) |"
  echo "|---|---:|---:|---:|---:|---:|"
  for m in mlp gpt; do
    # fields: measured db db_err an an_err sum_an sum_me nrep
    read -r -a f <<<"${sum[$m]}"
    echo "| ${lab[$m]} | ${f[7]} | ${f[5]} / ${f[6]} | ${f[0]} | ${f[1]} (${f[2]}%) | ${f[3]} (${f[4]}%) |"
  done
  echo "<!-- END profile -->"
} >"$tmp/section.md"
res=benchmarks/RESULTS.md
if grep -q '<!-- BEGIN profile ' "$res"; then
  awk -v sec="$tmp/section.md" '
    /<!-- BEGIN profile / { while ((getline l < sec) > 0) print l; skip = 1; next }
    /<!-- END profile -->/ { skip = 0; next }
    !skip { print }' "$res" >"$tmp/r.md"
  cp "$tmp/r.md" "$res"
else
  { echo; cat "$tmp/section.md"; } >>"$res"
fi
cat "$tmp/section.md"
exit $status
