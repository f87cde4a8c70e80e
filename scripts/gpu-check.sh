#!/usr/bin/env bash
# gpu-check.sh — the checks that need an NVIDIA GPU, as one short script for
# the lent accelerator machine (or any box with a GPU): configure and build
# with CUDA, then run each part. Without a GPU every part prints SKIP (a
# failing cudaGetDeviceCount counts as no GPU) and the script exits 0.
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (default build-gpu)
# Parts: runtime (issue 30) — the device plan's unit test, the CUDA kernels
# against the CPU kernels, flash attention's included (issue 29;
# tests/kernels/test_kernels_cuda.c), the CUDA backend
# against the CPU backend (tests/runtime/test_exec_cuda.c: one rank; two
# ranks as threads when two GPUs are present), then one-rank `simsearch run
# --backend cuda` runs (device-resident tensors, NCCL on the world
# communicator of one for the loss, streams and events) of a small fp32 GPT
# and of an MLP on a one-H100 topology: numerics against the CPU run and
# measured vs predicted. Each command has a time limit (the whole script
# stays under 10 minutes); the results replace the block between the
# "gpu-check runtime" markers of benchmarks/RESULTS.md (and go to
# $OUT/RESULTS.md too when OUT is set, for a lent machine's copy-back).
# The machine needs what scripts/setup.sh installs (jansson, hwloc, OpenBLAS,
# COIN-OR, PLplot, cmocka; Open MPI for the `simsearch run` part, which is
# skipped, saying so, without it) and NCCL (libnccl-dev, the toolkit's, or
# the nvidia-nccl wheel; NCCL_ROOT); NCCL_DEBUG defaults to WARN.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-gpu}
t0=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; exit 1; }
grep -E "CUDA|NCCL|backend" "$tmp/cmake.log"
timeout 300 cmake --build "$build" -j"$(nproc)" --target simsearch_cli \
  runtime_test_exec_cuda runtime_test_devplan kernels_test_kernels_cuda >"$tmp/build.log" 2>&1 ||
  { tail -40 "$tmp/build.log"; exit 1; }
# the MPI helper (simsearch run) only where Open MPI is installed
mpi=1
timeout 120 cmake --build "$build" -j"$(nproc)" --target simsearch_run_helper >>"$tmp/build.log" 2>&1 &&
  command -v mpirun >/dev/null || { mpi=0; echo "no Open MPI (mpirun or simsearch-run): the simsearch run checks are skipped"; }
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
fail=0
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU (nvidia-smi lists none): every GPU check skipped"
  exit 0
fi
gpu=$(nvidia-smi -L | head -1)
echo "$gpu"

# ---- runtime (issue 30) ---------------------------------------------------
rows=$tmp/rows
: >"$rows"
echo "== runtime: device plan (no GPU needed)"
SS_SOURCE_DIR=$src timeout 60 "$build/runtime_test_devplan" || fail=1
echo "== kernels: CUDA kernels vs CPU kernels (test_kernels_cuda; the runtime's CUDA backend runs them)"
SS_SOURCE_DIR=$src timeout 120 "$build/kernels_test_kernels_cuda" >"$tmp/k" 2>&1; st=$?
tail -5 "$tmp/k"
[ "$st" -eq 0 ] || fail=1
echo "| test_kernels_cuda (each op type, CUDA vs CPU) | $( [ "$st" -eq 0 ] && echo ok || echo "FAILED ($st)") | $(grep -c "OK \]" "$tmp/k") tests passed | | | |" >>"$rows"
echo "== runtime: CUDA backend vs CPU backend (test_exec_cuda)"
SS_SOURCE_DIR=$src timeout 180 "$build/runtime_test_exec_cuda" | tee "$tmp/unit"; st=${PIPESTATUS[0]}
[ "$st" -eq 0 ] || fail=1
echo "| test_exec_cuda (MLP 2x64, 4 iterations) | $( [ "$st" -eq 0 ] && echo ok || echo "FAILED ($st)") | $(grep -c "GPU rank" "$tmp/unit") runs compared | | | |" >>"$rows"
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
[ $mpi -eq 1 ] || echo "| simsearch run --backend cuda | SKIPPED | no Open MPI on this machine | | | |" >>"$rows"
for m in "$tmp/gpt.json 8 GPT-2x256-fp32" "mlp:layers=3,hidden=1024,in=1024 64 MLP-3x1024"; do
  [ $mpi -eq 1 ] || break
  set -- $m
  echo "== runtime: one GPU, NCCL world of one rank, $3"
  timeout 120 mpirun --allow-run-as-root --oversubscribe -np 1 "$build/simsearch" run \
    --model "$1" --batch "$2" --topology "$tmp/h100x1.json" --plan data-parallel \
    --backend cuda --iterations 10 --warmup 2 --json >"$tmp/j" 2>"$tmp/e"; st=$?
  cat "$tmp/j" "$tmp/e"
  [ "$st" -eq 0 ] || fail=1
  python3 - "$tmp/j" "$3" "$st" "$tmp/e" >>"$rows" <<'PY'
import json, sys
why = [l.strip() for l in open(sys.argv[4]) if "simsearch:" in l][:1]
try:
    j = json.load(open(sys.argv[1]))
    n = j["numerics"]
    print("| %s, one rank | %s | max_rel_diff %.3g | %.3f | %.3f | %.1f%% |" % (
        sys.argv[2], "ok" if n["ok"] else "FAILED", n["max_rel_diff"], j["measured_ms"],
        j["predicted_ms"], 100 * j["error"]))
except Exception as e:
    print("| %s, one rank | FAILED (exit %s) | %s | | | |" % (
        sys.argv[2], sys.argv[3], (why[0] if why else str(e)).replace("|", "/")))
PY
done

# ---- results into benchmarks/RESULTS.md ------------------------------------
res=$src/benchmarks/RESULTS.md
block=$tmp/block
{
  echo "<!-- gpu-check runtime begin -->"
  echo "\`bash scripts/gpu-check.sh\` at $(git -C "$src" rev-parse --short HEAD 2>/dev/null), $(date -u '+%Y-%m-%d %H:%M') UTC, $gpu; $(( $(date +%s) - t0 )) s in all."
  echo ""
  echo "| run | numerics | against the CPU run | measured ms | predicted ms | error |"
  echo "|---|---|---|---:|---:|---:|"
  cat "$rows"
  echo "<!-- gpu-check runtime end -->"
} >"$block"
python3 - "$res" "$block" <<'PY'
import os, sys
path, block = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
b, e = "<!-- gpu-check runtime begin -->", "<!-- gpu-check runtime end -->"
if b in text and e in text:
    text = text[:text.index(b)] + block.rstrip("\n") + text[text.index(e) + len(e):]
else:
    text = text.rstrip("\n") + "\n\n" + block
tmp = path + ".tmp"
open(tmp, "w").write(text)
os.replace(tmp, path)
PY
cat "$block"
[ -n "${OUT:-}" ] && cp "$res" "$OUT/RESULTS.md"
echo "gpu-check: $(( $(date +%s) - t0 )) s, $([ $fail -eq 0 ] && echo ok || echo FAILED)"
exit $fail
