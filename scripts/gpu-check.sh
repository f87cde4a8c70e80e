#!/usr/bin/env bash
# gpu-check.sh — the checks that need an NVIDIA GPU, as one short script for
# the lent accelerator machine (or any box with a GPU): configure and build
# with CUDA, then run each part. Without a GPU every part prints SKIP (a
# failing cudaGetDeviceCount counts as no GPU) and the script exits 0.
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (default build-gpu)
# Parts: kernels — the CUDA kernels against the CPU ones (flash attention's
# included, issue 29); runtime (issue 30) — the runtime's CUDA unit test (the CUDA
# kernels against the CPU on one GPU), then a one-GPU `simsearch run
# --backend cuda` of a small fp32 GPT and of an MLP on a one-H100
# topology: numerics against the CPU run and measured vs predicted.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-gpu}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" --target simsearch_cli simsearch_run_helper \
  runtime_test_exec kernels_test_kernels_cuda >/dev/null || exit 1
fail=0
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU (nvidia-smi lists none): every GPU check skipped"
  exit 0
fi
nvidia-smi -L

# ---- kernels (issues 29, 30) ------------------------------------------------
echo "== kernels: every CUDA kernel against the CPU one (flash attention included)"
"$build/kernels_test_kernels_cuda" || fail=1

# ---- runtime (issue 30) ---------------------------------------------------
echo "== runtime: CUDA unit test"
"$build/runtime_test_exec" || fail=1
tmp=$(mktemp -d)
python3 - "$src/topologies/h100x8.json" "$tmp/h100x1.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["name"] = "h100x1"
t["compact"]["devices_per_node"] = 1
t["compact"]["inter"]["nics_per_node"] = 1
json.dump(t, open(sys.argv[2], "w"))
PY
"$build/simsearch" model "gpt:layers=2,hidden=256,heads=4,seq=64,vocab=1024,vocab_pad=0,dropout=0" \
  --batch 8 --export "$tmp/gpt16.json" >/dev/null || fail=1
sed -e 's/"bf16"/"f32"/g; s/"mixed"/"fp32"/g' "$tmp/gpt16.json" >"$tmp/gpt.json"
for m in "$tmp/gpt.json 8" "mlp:layers=3,hidden=1024,in=1024 64"; do
  set -- $m
  echo "== runtime: one GPU, $(basename "$1")"
  mpirun --allow-run-as-root --oversubscribe -np 1 "$build/simsearch" run --model "$1" \
    --batch "$2" --topology "$tmp/h100x1.json" --plan data-parallel --backend cuda \
    --iterations 10 --warmup 2 || fail=1
done
rm -rf "$tmp"
exit $fail
