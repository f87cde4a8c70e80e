#!/usr/bin/env bash
# `simsearch run` of multi-head latent attention under tensor parallelism:
# a one-layer fp32 MLA GPT (q_lora 32, and q_lora 0: a full-rank q beside
# the replicated kv_a) on 2 MPI ranks, megatron:tp=2, matches one process
# (max_rel_diff < 1e-4; dp 2 gives 8e-8). Before the runtime ordered tied
# zero-duration backward tasks by depth, kv_b's heads on rank 1 read a stale
# gradient (0.67% off); before it counted a replicated consumer's input
# gradient once in a replica sum, q_lora 0 summed kv_a's share over both
# ranks (ln1, 0.48%). Without the MPI helper or mpirun: SKIP, exit 77.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
if [ ! -x "$(dirname "$bin")/simsearch-run" ] || ! command -v mpirun >/dev/null; then
  echo "SKIP: no simsearch-run helper or no mpirun (Open MPI not installed)"
  exit 77
fi
mpi() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OPENBLAS_NUM_THREADS=1 \
  timeout 300 mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$@"; }
for ql in 32 0; do
  spec="gpt:layers=1,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,rotary=1"
  spec="$spec,q_lora=$ql,kv_lora=16,qk_nope=8,qk_rope=8,v_head=16"
  "$bin" model "$spec" --batch 4 --export "$tmp/m16.json" >/dev/null
  check "export the MLA GPT (q_lora $ql)" $?
  # the CPU kernels run fp32: every bf16 tensor in f32
  sed -e 's/"bf16"/"f32"/g; s/"mixed"/"fp32"/g' "$tmp/m16.json" >"$tmp/m.json"
  for plan in megatron:tp=2 data-parallel; do
    mpi -np 2 "$bin" run --model "$tmp/m.json" --topology topologies/local-cpu.json --plan $plan \
      --batch 4 --optimizer sgd --iterations 3 --warmup 1 --json >"$tmp/j" 2>"$tmp/e"
    check "2 ranks: MLA q_lora $ql $plan exits 0" $?
    python3 - "$tmp/j" <<'PY'; check "... numerics match one process (max_rel_diff < 1e-4)" $?
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = r["numerics"]
print(r["plan"], "max_rel_diff", n["max_rel_diff"], "worst", n["worst_weight"])
sys.exit(0 if r["ranks"] == 2 and n["ok"] is True and n["max_rel_diff"] < 1e-4 else 1)
PY
  done
done
echo "$fail failure(s)"
[ $fail -eq 0 ]
