#!/usr/bin/env bash
# End-to-end checks of `simsearch run` on ZeRO-3 / FSDP plans (zero=3,
# runtime/zero3.h): under mpirun, 2-rank runs of the MLP and of a small fp32
# GPT sharded over dp 2 (one and two micro-batches, SGD and Adam) match the
# one-process run, and each rank's peak parameter bytes (--json
# param_peak_bytes) are below the distributed optimizer's (distopt=1) on the
# same plan; 4 ranks run tp 2 x dp 2 (parameter gathers over the
# data-parallel pairs) and pp 2 x dp 2 with zero=3; the trace shows the task graph's parameter
# all-gathers and its one gradient bucket per rank and nothing else; split
# buckets and backward reordering with priority match one process too;
# --backend cuda refuses the plan (exit 2, naming ZeRO-3).
# Without the MPI helper or mpirun it prints a SKIP line and exits 77.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
if [ ! -x "$(dirname "$bin")/simsearch-run" ] || ! command -v mpirun >/dev/null; then
  echo "SKIP: no simsearch-run helper or no mpirun (Open MPI not installed)"
  exit 77
fi
mpi() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OPENBLAS_NUM_THREADS=1 \
  timeout 300 mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$@"; }
topo=topologies/local-cpu.json
mlp="mlp:layers=2,hidden=128,in=64"
gpt="gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,precision=fp32"
# MODEL PLAN BATCH OPTIMIZER -> $tmp/j (the JSON line)
run2() {
  mpi -np 2 "$bin" run --model "$1" --topology $topo --plan "$2" --batch "$3" --optimizer "$4" \
    --iterations 3 --warmup 1 --json >"$tmp/j" 2>"$tmp/e"
}
for c in "$mlp 32 sgd" "$mlp 32 adam" "$gpt 4 sgd" "$gpt 4 adam"; do
  set -- $c
  for mb in 1 2; do
    run2 "$1" "megatron:dp=2,mb=$mb,distopt=1" "$2" "$3"
    check "2 ranks: $(basename "$1") dp=2,mb=$mb,distopt=1 $3 exits 0" $?
    cp "$tmp/j" "$tmp/j1"
    run2 "$1" "megatron:dp=2,mb=$mb,zero=3" "$2" "$3"
    check "2 ranks: $(basename "$1") dp=2,mb=$mb,zero=3 $3 exits 0" $?
    python3 - "$tmp/j" "$tmp/j1" <<'PY'; check "... numerics match one process; peak parameter bytes below distopt=1's" $?
import json, sys
r, d = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:])
n = r["numerics"]
ok = r["ranks"] == 2 and n["ok"] is True and n["max_rel_diff"] < 1e-4
ok = ok and 0 < r["param_peak_bytes"] < d["param_peak_bytes"]
print(r["plan"], r["optimizer"], "max_rel_diff", n["max_rel_diff"], "param_peak_bytes",
      r["param_peak_bytes"], "distopt=1:", d["param_peak_bytes"],
      "collectives", r["collectives_per_iteration"])
sys.exit(0 if ok else 1)
PY
  done
done
# issue 31's sync settings under zero=3: a bucket threshold that splits fc2's
# gradient (64 KiB) in four (each part reduce-scattered per micro-batch),
# and priority with backward reordering K = 2 (deferred weight-gradient tasks)
"$bin" plan --model "$mlp" --batch 32 --topology $topo --plan megatron:dp=2,mb=2,zero=3 \
  --out "$tmp/z.json" >/dev/null
python3 - "$tmp/z.json" "$tmp/zsplit.json" "$tmp/zreorder.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["settings"].update(bucket_bytes=16384)
json.dump(p, open(sys.argv[2], "w"))
p["settings"].update(bucket_bytes=80000000, priority=True, reorder_backward=2)
json.dump(p, open(sys.argv[3], "w"))
PY
for f in zsplit zreorder; do
  run2 "$mlp" "$tmp/$f.json" 32 adam
  check "2 ranks: mlp zero=3 $f exits 0" $?
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(sys.argv[2], r["numerics"], r["collectives_per_iteration"], "collectives"); sys.exit(0 if r["numerics"]["ok"] and r["numerics"]["max_rel_diff"] < 1e-4 else 1)' "$tmp/j" $f
  check "... numerics match one process" $?
done
mpi -np 2 "$bin" run --model "$mlp" --topology $topo --plan megatron:dp=2,zero=3 --batch 32 \
  --iterations 1 --warmup 0 --trace "$tmp/t.json" >/dev/null 2>&1; check "run --trace of zero=3 exits 0" $?
python3 - "$tmp/t.json" <<'PY'; check "... each rank's trace: 6 parameter all-gathers (3 ops x forward, backward) and 1 gradient bucket" $?
import json, sys
t = json.load(open(sys.argv[1]))
ok = True
for pid in (0, 1):
    coll = [e["name"] for e in t if e["pid"] == pid and e["cat"] == "collective"]
    ag = [c for c in coll if c.startswith("allgather weights")]
    gb = [c for c in coll if "grads bucket" in c]
    print("rank", pid, len(ag), "parameter all-gathers,", len(gb), "gradient buckets:", sorted(set(coll)))
    ok = ok and len(ag) == 6 and len(gb) == 1 and len(coll) == 7
sys.exit(0 if ok else 1)
PY
# 4 ranks: tp 2 x dp 2 with zero=3
python3 - "$topo" "$tmp/cpu4.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["name"] = "local-cpu4"
t["devices"] = [{"name": "core%d" % i, "type": "CPU-core", "host": "localhost"} for i in range(4)]
t["links"] = [dict(t["links"][0], a="core%d" % i) for i in range(4)]
json.dump(t, open(sys.argv[2], "w"))
PY
# and pp 2 x dp 2 (the tied embedding's shard spans both stages: each stage's
# op gathers it over the 4 ranks)
for c in "tp=2,dp=2 sgd" "tp=2,dp=2 adam" "pp=2,dp=2,mb=2 sgd"; do
  set -- $c
  opt=$2
  mpi -np 4 "$bin" run --model "$gpt" --topology "$tmp/cpu4.json" --plan megatron:$1,zero=3 \
    --batch 4 --iterations 2 --warmup 1 --optimizer $opt --json >"$tmp/j" 2>"$tmp/e"
  check "4 ranks: gpt megatron:$1,zero=3 $opt exits 0" $?
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(r["plan"], r["numerics"]); sys.exit(0 if r["numerics"]["ok"] and r["ranks"] == 4 else 1)' "$tmp/j"
  check "... numerics match one process" $?
done
# the CUDA backend refuses ZeRO-3 plans (before any work)
mpi -np 2 "$bin" run --model "$mlp" --topology $topo --plan megatron:dp=2,zero=3 --batch 32 \
  --backend cuda >/dev/null 2>"$tmp/e"; st=$?
[ $st -eq 2 ]; check "--backend cuda with zero=3 exits 2 ($st)" $?
echo "$fail failure(s)"
[ $fail -eq 0 ]
