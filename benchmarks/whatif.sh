#!/usr/bin/env bash
# whatif.sh — the what-if benchmark of issue 33: GPT-3 175B (batch 1,536,
# 300 B tokens) on dgx-a100 x 32..512 nodes (256..4,096 GPUs, x2 steps) x
# {A100-SXM4-80GB, H100-SXM} x inter-node {200, 400} Gb/s = 20 points, each
# planned by the LLM planner at LEVEL (default 0) on one thread, points on
# THREADS workers (default: all cores). Writes benchmarks/whatif/gpt3-175b.
# {csv,json,svg,png} and prints the process's CPU and wall time.
# Usage: benchmarks/whatif.sh BUILD_DIR
set -eu
build=${1:?usage: whatif.sh BUILD_DIR}
level=${LEVEL:-0}
cd "$(dirname "$0")/.."
out=benchmarks/whatif
mkdir -p "$out"
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
args=(whatif --model gpt:layers=96,hidden=12288,heads=96,seq=2048 --batch 1536
      --topology topologies/dgx-a100.json --nodes 32..512
      --device-type A100-SXM4-80GB,H100-SXM --inter-gbps 200,400
      --tokens 300B --price A100=1.8,H100=3.0 --level "$level" "${threads[@]}")
/usr/bin/time -f "time: %e s wall, %U s user, %S s system, %M KB peak RSS" \
  "$build/simsearch" "${args[@]}" --csv "$out/gpt3-175b.csv" \
  --plot "$out/gpt3-175b.svg,$out/gpt3-175b.png" 2>"$out/stderr.txt" | tee "$out/gpt3-175b.txt"
tail -1 "$out/stderr.txt"
rm -f "$out/stderr.txt"
