#!/usr/bin/env bash
# End-to-end checks of `simsearch run` (the runtime): usage errors exit 2,
# without a GPU the CUDA backend is refused on every rank (exit 2); with Open MPI, 2-rank runs of the MLP
# (data-, tensor- and pipeline-parallel) and of a small fp32 GPT (data- and
# tensor-parallel) match the one-process run (numerics ok, --json fields:
# copy_bytes_per_iteration 0 for data-parallel, > 0 for tensor-parallel),
# also with the distributed optimizer (reduce-scatter + all-gather), sequence
# parallelism and expert parallelism (all-to-alls: no point-to-point sends);
# the zoo GPT takes precision=fp32 (and a CPU profile of it measures its tiles);
# a plan on more devices than ranks exits 2 naming the ranks, a plan for
# another model fails naming it; killing one
# rank mid-run makes the run exit non-zero within 30 s, naming the rank.
# The runs cover DP (also with split buckets, priority, reordering and synced
# flags), TP, PP (GPipe, 1F1B, interleaved), searched plans of the MLP and
# the GPT and the mixed GPT plan bench_runtime.sh's search found (i32 token
# ids sent, a tied table read through overlapping regions); every rank executes its device's tasks of the simulated task graph.
# Without the MPI helper or mpirun it prints a SKIP line and exits 77.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
"$bin" run --help >"$tmp/h" 2>&1; check "run --help exits 0" $?
grep -q -- "--iterations" "$tmp/h"; check "... listing --iterations" $?
"$bin" run --model mlp --topology topologies/local-cpu.json >/dev/null 2>&1; [ $? -eq 2 ]
check "run without --plan exits 2" $?
"$bin" run --model mlp --topology topologies/local-cpu.json --plan data-parallel --backend tcp \
  >/dev/null 2>&1; [ $? -eq 2 ]; check "run --backend tcp exits 2" $?
# precision=fp32 (issue 30): the zoo GPT in f32 — its parameters unchanged, no bf16
# tensor, fp32 training — and a CPU profile of it measures its tiles
g16="gpt:layers=1,hidden=16,heads=2,seq=4,vocab=16"
"$bin" model "$g16" --batch 2 --json >"$tmp/m16" 2>&1 &&
  "$bin" model "$g16,precision=fp32" --batch 2 --json >"$tmp/m32" 2>&1 &&
  "$bin" model "$g16,precision=fp32" --batch 2 --export "$tmp/g32.json" >/dev/null 2>&1
check "model gpt:...,precision=fp32 exits 0" $?
python3 - "$tmp/m16" "$tmp/m32" "$tmp/g32.json" <<'PY'; check "... same parameters, fp32 training, every float tensor f32" $?
import json, sys
a, b, g = (json.load(open(f)) for f in sys.argv[1:])
dt = {t["dtype"] for t in g["tensors"]}
print("precision=fp32:", b["parameters"], "parameters (bf16:", a["parameters"], "),", b["precision"], sorted(dt))
sys.exit(0 if a["parameters"] == b["parameters"] and b["precision"] == "fp32" and a["precision"] == "mixed"
         and "bf16" not in dt and "f32" in dt else 1)
PY
"$bin" model "$g16,precision=fp64" >"$tmp/o" 2>&1; [ $? -eq 2 ] && grep -q "fp32" "$tmp/o"
check "precision=fp64 exits 2 listing fp32" $?
OPENBLAS_NUM_THREADS=1 "$bin" profile --model "$g16,precision=fp32" --batch 2 \
  --topology topologies/local-cpu.json --db "$tmp/p32.json" --reps 1 --warmup 0 --warm-cache \
  >"$tmp/o" 2>&1; check "profile of the fp32 zoo GPT on the CPU exits 0" $?
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["entries"]; print(len(e), "tiles measured"); sys.exit(0 if len(e) >= 10 else 1)' \
  "$tmp/p32.json"; check "... and measures its tiles" $?
if [ ! -x "$(dirname "$bin")/simsearch-run" ] || ! command -v mpirun >/dev/null; then
  echo "SKIP: no simsearch-run helper or no mpirun (Open MPI not installed); $fail failure(s)"
  [ $fail -eq 0 ] && exit 77
  exit 1
fi
"$bin" run --model mlp --topology topologies/local-cpu.json --plan data-parallel \
  --optimizer rmsprop >/dev/null 2>&1; [ $? -eq 2 ]; check "run --optimizer rmsprop exits 2" $?
# Under ASan, leak checking is off in the MPI ranks: Open MPI's plugins leak
# on every exit path (dlclosed, so no suppression can name them); the
# runtime's own leaks are checked by tests/runtime/test_exec.c (ranks as
# threads, leak checking on).
one_device_plan() { # the MLP's tiles all on device 0
  "$bin" plan --model "mlp:layers=2,hidden=128,in=64" --batch 32 --topology topologies/local-cpu.json \
    --plan data-parallel --out "$tmp/dp2.json" >/dev/null &&
  python3 - "$tmp/dp2.json" "$tmp/one.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for c in p["operators"].values():
    c["degrees"] = [1] * len(c["degrees"])
    c["devices"] = [0]
json.dump(p, open(sys.argv[2], "w"))
PY
}
mpi() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 OPENBLAS_NUM_THREADS=1 \
  timeout 300 mpirun --allow-run-as-root --oversubscribe -x OPENBLAS_NUM_THREADS=1 "$@"; }
# --backend cuda: refused before any rank starts work without a GPU or without
# the CUDA backend (exit 2 on every rank, each naming itself); with a GPU
# (scripts/gpu-check.sh runs it there) the one-rank run must pass
one_device_plan
mpi -np 1 "$bin" run --model "mlp:layers=2,hidden=128,in=64" --batch 32 \
  --topology topologies/local-cpu.json --plan "$tmp/one.json" --backend cuda \
  >/dev/null 2>"$tmp/e"; st=$?
if grep -q "no CUDA GPU\|no CUDA kernels\|no CUDA backend" "$tmp/e"; then
  [ $st -eq 2 ]; check "run --backend cuda without a GPU exits 2 ($st)" $?
  mpi -np 2 "$bin" run --model "mlp:layers=2,hidden=128,in=64" --batch 32 \
    --topology topologies/local-cpu.json --plan data-parallel --backend cuda \
    >/dev/null 2>"$tmp/e2"; st=$?
  [ $st -eq 2 ] && grep -q "rank 0: .*cuda" "$tmp/e2" && grep -q "rank 1: .*cuda" "$tmp/e2"
  check "2 ranks, --backend cuda without a GPU: both ranks refuse and exit 2 ($st)" $?
  echo "SKIP: the CUDA runtime run: $(grep -o "no CUDA [^(]*" "$tmp/e" | head -1)"
else
  [ $st -eq 0 ]; check "run --backend cuda on a GPU exits 0 ($st)" $?
fi
topo=topologies/local-cpu.json
mlp="mlp:layers=2,hidden=128,in=64"
# the CPU kernels run fp32: the zoo GPT with precision=fp32
gpt="gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,precision=fp32"
# four layers for the interleaved schedule (pp*vp = 4 chunks)
gpt4="gpt:layers=4,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,precision=fp32"
# two experts per MoE layer, one per rank (expert parallelism's all-to-alls)
moe="$gpt,experts=2,topk=1"
"$bin" search --model "$mlp" --batch 32 --topology $topo --budget 200 --seed 3 \
  --out "$tmp/searched.json" >/dev/null 2>&1; check "search finds a plan of the MLP" $?
"$bin" search --model "$gpt" --batch 4 --topology $topo --budget 200 --seed 1 \
  --out "$tmp/searched-gpt.json" >/dev/null 2>&1; check "search finds a plan of the GPT" $?
# the shape of the GPT plan bench_runtime.sh's search found (tests/runtime/mixed_gpt.h):
# token ids (i32) split by sample under an embedding split by hidden, whose tied table
# lm_head reads split by vocabulary; sums and norms by sequence, attention by heads
"$bin" plan --model "$gpt" --batch 4 --topology $topo --plan data-parallel --out "$tmp/gdp.json" \
  >/dev/null
python3 - "$tmp/gdp.json" "$tmp/mixed-gpt.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
seq = ["positions", "embed.positions", "embed.add", "ln1", "ln2", "attn.residual",
       "mlp.residual", "final_ln"]
heads = ["attn.q_t", "attn.k_t", "attn.v_t", "attn.scores", "attn.softmax", "attn.context"]
last = ["embed.tokens", "attn.qkv", "attn.merge", "mlp.fc1", "mlp.gelu", "lm_head"]
for name, o in p["operators"].items():
    n = name.split(".", 1)[1] if name[:1] == "l" and name[1:2].isdigit() else name
    d = [1] * len(o["degrees"])
    red = 1
    if n in ("tokens", "labels"):
        d[0] = 2
    elif n in seq or n in heads:
        d[1] = 2
    elif n in last:
        d[-1] = 2
    elif n in ("attn.qkv_reshape", "attn.split", "attn.context_t"):
        d[2] = 2
    elif n in ("attn.proj", "mlp.fc2", "loss"):
        red = 2
    else:
        sys.exit("unknown op " + name)
    o.update(degrees=d, reduction=red, devices=[0, 1])
p["settings"].update(distopt=True, reorder_backward=True)
json.dump(p, open(sys.argv[2], "w"))
PY
check "... the mixed GPT plan written" $?
# GPipe: the 1F1B plan's settings with the GPipe schedule and FIFO queues
"$bin" plan --model "$mlp" --batch 32 --topology $topo --plan megatron:pp=2,mb=4 \
  --out "$tmp/pp.json" >/dev/null
python3 - "$tmp/pp.json" "$tmp/gpipe.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["settings"]["schedule"] = "gpipe"
p["settings"]["queue"] = "fifo"
json.dump(p, open(sys.argv[2], "w"))
PY
# issue 31's sync settings: a bucket threshold that splits fc2's gradient
# (64 KiB) in four, priority, backward reordering K = 2 (deferred weight-
# gradient tasks) and synced flags (the next forward runs in the next
# iteration, not twice)
"$bin" plan --model "$mlp" --batch 32 --topology $topo --plan data-parallel --out "$tmp/dps.json" \
  >/dev/null
python3 - "$tmp/dps.json" "$tmp/dpsync.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["settings"].update(bucket_bytes=16384, priority=True, reorder_backward=2, synced_flags=True)
json.dump(p, open(sys.argv[2], "w"))
PY
for c in "$mlp data-parallel 32 sgd" "$mlp $tmp/dpsync.json 32 sgd" "$mlp megatron:tp=2 32 sgd" "$mlp megatron:tp=2 32 adam" \
         "$mlp megatron:pp=2,mb=2 32 sgd" "$mlp megatron:pp=2,mb=4 32 sgd" "$mlp $tmp/gpipe.json 32 sgd" \
         "$mlp $tmp/searched.json 32 sgd" "$gpt $tmp/searched-gpt.json 4 sgd" \
         "$gpt $tmp/mixed-gpt.json 4 sgd" "$gpt data-parallel 4 sgd" \
         "$gpt megatron:tp=2 4 adam" "$gpt megatron:pp=2,mb=2 4 sgd" \
         "$gpt4 megatron:pp=2,vp=2,mb=2 4 sgd" "$gpt megatron:dp=2,distopt=1 4 adam" \
         "$gpt megatron:tp=2,sp=1 4 sgd" "$moe megatron:dp=2,ep=2 4 sgd"; do
  set -- $c
  mpi -np 2 "$bin" run --model "$1" --topology $topo --plan "$2" --batch "$3" --optimizer "$4" \
    --iterations 3 --warmup 1 --json >"$tmp/j" 2>"$tmp/e"
  check "2 ranks: $(basename "$1") $2 $4 exits 0" $?
  python3 - "$tmp/j" <<'PY'; check "... numerics match one process (max_rel_diff < 1e-4)" $?
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n = r["numerics"]
ok = r["ranks"] == 2 and n["ok"] is True and n["max_rel_diff"] < 1e-4
ok = ok and r["measured_ms"] > 0 and r["predicted_ms"] > 0 and r["error"] >= 0
if r["plan"].endswith("ep=2"):  # the expert slots move in all-to-alls, not sends
    ok = ok and r["transfers_per_iteration"] == 0 and r["collectives_per_iteration"] >= 8
if r["plan"] == "data-parallel":  # samples split: every region used in place
    ok = ok and r["copy_bytes_per_iteration"] == 0
if r["plan"] == "megatron:tp=2":  # column halves are not contiguous: copied
    ok = ok and r["copy_bytes_per_iteration"] > 0
print(r["plan"], "max_rel_diff", n["max_rel_diff"], "measured", r["measured_ms"],
      "predicted", r["predicted_ms"], "collectives", r["collectives_per_iteration"],
      "transfers", r["transfers_per_iteration"], "copies", r["copy_bytes_per_iteration"])
sys.exit(0 if ok else 1)
PY
done
# 4 ranks (oversubscribed): collectives over sub-groups (tensor- and
# data-parallel pairs: MPI_Comm_create_group); tp x pp with Megatron's
# scatter-gather stage-boundary sends (each tensor-parallel rank sends its
# slice, the receivers all-gather) matches one process
python3 - "$topo" "$tmp/cpu4.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["name"] = "local-cpu4"
t["devices"] = [{"name": "core%d" % i, "type": "CPU-core", "host": "localhost"} for i in range(4)]
t["links"] = [dict(t["links"][0], a="core%d" % i) for i in range(4)]
json.dump(t, open(sys.argv[2], "w"))
PY
mpi -np 4 "$bin" run --model "$gpt" --topology "$tmp/cpu4.json" --plan megatron:tp=2,dp=2 \
  --batch 4 --iterations 2 --warmup 1 --json >"$tmp/j" 2>"$tmp/e"
check "4 ranks: gpt megatron:tp=2,dp=2 exits 0" $?
python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); sys.exit(0 if r["numerics"]["ok"] and r["ranks"] == 4 else 1)' "$tmp/j"
check "... numerics match one process" $?
# sequence parallel x data parallel (issue 31): the layer norms' gradients in
# the data-parallel reduce-scatters, then one all-reduce per tensor-parallel pair
mpi -np 4 "$bin" run --model "$gpt" --topology "$tmp/cpu4.json" \
  --plan megatron:tp=2,dp=2,sp=1,distopt=1 --optimizer adam --batch 4 --iterations 2 --warmup 1 \
  --json >"$tmp/j" 2>"$tmp/e"
check "4 ranks: gpt megatron:tp=2,dp=2,sp=1,distopt=1 exits 0" $?
python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); sys.exit(0 if r["numerics"]["ok"] and r["ranks"] == 4 else 1)' "$tmp/j"
check "... numerics match one process" $?
mpi -np 4 "$bin" run --model "$gpt" --topology "$tmp/cpu4.json" --plan megatron:tp=2,pp=2,mb=2 \
  --batch 4 --iterations 1 --warmup 1 --json --trace "$tmp/sg.json" >"$tmp/j" 2>"$tmp/e"
check "4 ranks: gpt megatron:tp=2,pp=2 (scatter-gather sends) exits 0" $?
python3 - "$tmp/j" "$tmp/sg.json" <<'PY'; check "... numerics match one process; half-region sends, then the receivers' all-gathers" $?
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
t = json.load(open(sys.argv[2]))
sends = [e for e in t if e["cat"] == "xfer"]
gathers = [e for e in t if e["name"].startswith("allgather scatter-gather send")]
print("tp x pp:", r["numerics"], len(sends), "sends,", len(gathers), "all-gathers")
sys.exit(0 if r["numerics"]["ok"] and r["ranks"] == 4 and sends and gathers else 1)
PY
mpi -np 2 "$bin" run --model "$mlp" --topology $topo --plan megatron:tp=2 --batch 32 \
  --iterations 1 --warmup 0 --trace "$tmp/t.json" >/dev/null 2>&1; check "run --trace exits 0" $?
python3 - "$tmp/t.json" <<'PY'; check "... a Chrome trace of both ranks' tasks, named as simulate --trace names them, in simulated order" $?
import json, sys
t = json.load(open(sys.argv[1]))
names = [e["name"] for e in t]
ok = {e["pid"] for e in t} == {0, 1} and "fwd fc1 t0 mb0" in names and "bwd fc1 t1 mb0" in names
ok = ok and "allreduce partial sums fc2" in names and "update fc1.weight" in names
ok = ok and all(e["ph"] == "X" and e["dur"] >= 0 for e in t)
# what ran is what was simulated, in the simulated order on every rank
for pid in (0, 1):
    sim = [e["args"]["sim_ts"] for e in sorted((e for e in t if e["pid"] == pid),
                                               key=lambda e: e["ts"])]
    ok = ok and len(sim) > 10 and sim == sorted(sim)
sys.exit(0 if ok else 1)
PY
mpi -np 1 "$bin" run --model "$mlp" --topology $topo --plan data-parallel --batch 32 \
  >/dev/null 2>"$tmp/e"; [ $? -eq 2 ]; check "a 2-device plan on 1 rank exits 2" $?
grep -q "only 1 ranks run" "$tmp/e"; check "... naming the ranks" $?
"$bin" plan --model "$mlp" --batch 32 --topology $topo --plan data-parallel --out "$tmp/dp.json" \
  >/dev/null
mpi -np 2 "$bin" run --model "mlp:layers=2,hidden=64,in=64" --batch 32 --topology $topo \
  --plan "$tmp/dp.json" >/dev/null 2>"$tmp/e"; [ $? -ne 0 ]; check "a plan for another model fails" $?
grep -q "was made for model" "$tmp/e"; check "... saying which model it was made for" $?
# fault: kill rank 1 mid-run; the run must end non-zero within 30 s naming it
# (an iteration count of this shell's own, so that pgrep finds this test's ranks only)
iters=$((50000 + $$ % 50000))
start=$(date +%s)
mpi -np 2 "$bin" run --model "$mlp" --topology $topo --plan data-parallel --batch 32 \
  --iterations $iters >/dev/null 2>"$tmp/e" &
runner=$!
victim=""
for _ in $(seq 100); do
  sleep 0.2
  victim=$(pgrep -f -- "simsearch-run run --model $mlp .*--iterations $iters" | sort -n | tail -1)
  [ -n "$victim" ] && [ "$(pgrep -f -- "simsearch-run run --model $mlp .*--iterations $iters" | wc -l)" -ge 2 ] && break
done
sleep 1
[ -n "$victim" ] && kill -9 "$victim"
wait $runner; st=$?
took=$(( $(date +%s) - start ))
[ $st -ne 0 ] && [ $took -le 30 ]; check "killing a rank ends the run non-zero within 30 s ($st, ${took}s)" $?
grep -Eq "rank [01]" "$tmp/e"; check "... naming the rank" $?
grep -E "rank [01]" "$tmp/e" | head -2
echo "$fail failure(s)"
[ $fail -eq 0 ]
