#!/usr/bin/env bash
# `simsearch simulate --evaluator`: symmetry on a symmetric plan gives the
# full simulation's numbers, auto runs small plans (< 2^16 tile entries) in
# full, full and symmetry are forced, an
# asymmetric plan falls back (or fails when symmetry is forced), the JSON
# keys evaluator / tasks_simulated / symmetry_classes / eval_ms, and the
# trace of a symmetric run draws every device's events as the full one.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
args="--model gpt:layers=2,hidden=64,heads=8,seq=32,vocab=512 --batch 64 --topology topologies/dgx-a100.json --nodes 2"
mega="--plan megatron:tp=2,pp=2,dp=4,mb=4"

"$bin" simulate $args $mega --evaluator full --json >"$tmp/f.json"; check "full exits 0" $?
"$bin" simulate $args $mega --json >"$tmp/a.json"; check "auto (default) exits 0" $?
"$bin" simulate $args $mega --evaluator symmetry --json >"$tmp/s.json"; check "symmetry exits 0" $?
python3 - "$tmp" <<'PY'; check "symmetry = full (= auto: a small plan) except the evaluator keys; keys present" $?
import json, sys
d = sys.argv[1]
f, a, s = (json.load(open(f"{d}/{x}.json")) for x in "fas")
for k in ("evaluator", "tasks_simulated", "symmetry_classes", "eval_ms"):
    assert k in f and k in a, k
assert f["evaluator"] == "full" and a["evaluator"] == "full" and s["evaluator"] == "symmetry"
assert f["tasks_simulated"] == f["tasks"] and s["tasks_simulated"] < s["tasks"]
assert f["symmetry_classes"] == 16 and s["symmetry_classes"] == 4, (f["symmetry_classes"], s["symmetry_classes"])
assert s["eval_ms"] > 0
for x in (a, s):
    for k in f:
        if k not in ("evaluator", "tasks_simulated", "symmetry_classes", "eval_ms"):
            assert f[k] == x[k], k
PY
"$bin" simulate $args $mega --evaluator symmetry >"$tmp/h" 2>&1; check "human output exits 0" $?
grep -q "^evaluator  symmetry: [0-9]* tasks simulated, 4 device classes" "$tmp/h"; check "human output names the evaluator" $?
"$bin" simulate $args $mega --evaluator full >"$tmp/h" 2>&1
grep -q "^evaluator  full: [0-9]* tasks simulated, 16 device classes" "$tmp/h"; check "full names itself" $?

# data parallelism over 12 of 16 devices is not symmetric
"$bin" simulate $args --plan data-parallel --evaluator symmetry --json >"$tmp/dp.json"; check "data-parallel exits 0" $?
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['evaluator']=='symmetry'" "$tmp/dp.json"; check "data-parallel over 2 nodes is symmetric" $?
"$bin" simulate --model mlp:layers=2,hidden=128 --batch 80 --topology topologies/volunteers40.json --plan data-parallel --json >"$tmp/v.json"; check "volunteers exits 0" $?
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['evaluator']=='full'" "$tmp/v.json"; check "mixed devices and peers fall back to full" $?
"$bin" simulate --model mlp:layers=2,hidden=128 --batch 80 --topology topologies/volunteers40.json --plan data-parallel --evaluator symmetry >"$tmp/e" 2>&1
[ $? -ne 0 ]; check "forced symmetry on an asymmetric plan fails" $?
grep -q "symmetric evaluator does not apply: " "$tmp/e"; check "and says why" $?
"$bin" simulate $args $mega --evaluator bogus >"$tmp/e" 2>&1; [ $? -eq 2 ]; check "unknown evaluator exits 2" $?
grep -q 'unknown evaluator "bogus"' "$tmp/e"; check "and names it" $?

# traces: the symmetric run draws the same events on the same tracks
"$bin" simulate $args $mega --evaluator full --trace "$tmp/f.trace" >/dev/null; check "full trace" $?
"$bin" simulate $args $mega --evaluator symmetry --trace "$tmp/s.trace" >/dev/null; check "symmetric trace" $?
python3 - "$tmp" <<'PY'; check "symmetric trace = full trace (events per device and channel)" $?
import json, re, sys
d = sys.argv[1]
def events(p):
    t = json.load(open(p))["traceEvents"]
    # names without the tile index (a representative's tile stands for its copies')
    ev = sorted((re.sub(r" t[0-9]+ ", " ", e["name"]), e["pid"], e["tid"], e["ts"], e["dur"])
                for e in t if e["ph"] == "X")
    names = {e["pid"]: e["args"]["name"] for e in t if e["ph"] == "M" and e["name"] == "process_name"}
    return ev, names
fe, fn = events(f"{d}/f.trace")
se, sn = events(f"{d}/s.trace")
assert fe == se, (len(fe), len(se))
assert len(set(p for _, p, _, _, _ in se)) == len(set(p for _, p, _, _, _ in fe))
assert any("timeline (symmetry)" in v for v in sn.values())
PY

# the hierarchical evaluator: forced on a 1F1B Megatron plan it agrees with
# the full simulation within 0.5%, and so on an interleaved plan (vp=2);
# it keeps no timeline; a plan it cannot judge (an operator's micro-batches
# on different devices) fails when forced; auto picks it only past
# SS_EVAL_HIER_TILES tile entries
big="--model gpt:layers=4,hidden=256,heads=8,seq=128,vocab=1024 --batch 512 --topology topologies/dgx-a100.json --nodes 2"
bigp="--plan megatron:tp=2,pp=2,dp=4,mbs=1"
"$bin" simulate $big $bigp --evaluator full --json >"$tmp/hf.json"; check "full on the 1F1B plan" $?
"$bin" simulate $big $bigp --evaluator hier --json >"$tmp/hh.json"; check "hierarchical exits 0" $?
python3 - "$tmp" <<'PY'; check "hierarchical within 0.5% of full, names itself, simulates fewer tasks" $?
import json, sys
d = sys.argv[1]
f, h = (json.load(open(f"{d}/{x}.json")) for x in ("hf", "hh"))
assert h["evaluator"] == "hierarchical", h["evaluator"]
err = abs(h["iteration_time_ms"] / f["iteration_time_ms"] - 1)
assert err <= 0.005, err
assert h["tasks_simulated"] < f["tasks_simulated"]
assert h["critical_path_ms"] is None and h["critical_path"] == [], "hierarchical keeps no critical path"
assert f["critical_path_ms"] > 0 and f["critical_path"], "the full one does"
PY
"$bin" simulate $big $bigp --evaluator hier >"$tmp/h" 2>&1
grep -q "^critical path: not kept by the hierarchical evaluator" "$tmp/h"; check "human output says there is no critical path" $?
"$bin" simulate $big $bigp --evaluator hier --trace "$tmp/h.trace" >"$tmp/e" 2>&1
[ $? -ne 0 ] && [ ! -e "$tmp/h.trace" ]; check "a trace from the hierarchical evaluator is refused, nothing written" $?
grep -q "hierarchical evaluator does not keep" "$tmp/e"; check "and says why" $?
"$bin" simulate $big --plan megatron:tp=2,pp=2,dp=4,mbs=1,vp=2 --evaluator full --json >"$tmp/vf.json" &&
"$bin" simulate $big --plan megatron:tp=2,pp=2,dp=4,mbs=1,vp=2 --evaluator hier --json >"$tmp/vh.json"
check "full and hierarchical on the interleaved plan exit 0" $?
python3 - "$tmp" <<'PY'; check "hierarchical within 0.5% of full on the interleaved plan" $?
import json, sys
d = sys.argv[1]
f, h = (json.load(open(f"{d}/{x}.json")) for x in ("vf", "vh"))
assert h["evaluator"] == "hierarchical", h["evaluator"]
assert abs(h["iteration_time_ms"] / f["iteration_time_ms"] - 1) <= 0.005
PY
"$bin" plan $big $bigp --out "$tmp/p.json" >/dev/null; check "plan written" $?
python3 - "$tmp" <<'PY'; check "a plan with one operator's micro-batches on swapped devices" $?
import json, sys
d = sys.argv[1]
p = json.load(open(f"{d}/p.json"))
c = p["operators"]["embed.tokens"]
sh, st = c["devices"]["shape"], c["devices"]["strides"]  # dp x micro-batch x tp
assert st[1] == 0 and sh[2] == 2, c
c["devices"] = [c["devices"]["offset"] + i * st[0] + (t ^ (k & 1)) * st[2]
                for i in range(sh[0]) for k in range(sh[1]) for t in range(2)]
json.dump(p, open(f"{d}/p2.json", "w"))
PY
"$bin" simulate $big --plan "$tmp/p2.json" --evaluator hier >"$tmp/e" 2>&1
[ $? -ne 0 ]; check "forced hierarchical on a plan it cannot judge fails" $?
grep -q "hierarchical evaluator does not apply: .*\"embed.tokens\" runs its micro-batches on different devices" "$tmp/e"
check "and says why" $?
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['evaluator']=='full'" "$tmp/a.json"; check "auto runs small plans in full" $?

# auto between the thresholds: symmetry (2^16 <= tile entries < 2^20)
"$bin" simulate --model gpt:layers=4,hidden=256,heads=8,seq=128 --batch 512 --topology topologies/dgx-a100.json --nodes 8 --plan megatron:tp=2,pp=2,dp=16,mbs=1 --json >"$tmp/mid.json"; check "a mid-size plan" $?
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['evaluator']=='symmetry' and d['tasks_simulated'] < d['tasks']" "$tmp/mid.json"; check "auto judges a mid-size symmetric plan by symmetry" $?

# search --evaluator: the exact evaluators find the same plan (same chain);
# an unknown name exits 2 before any work
"$bin" search --model mlp:layers=2,hidden=128 --batch 64 --topology topologies/p100x16.json --budget 200 --out "$tmp/sf.json" --evaluator full >/dev/null 2>&1; check "search --evaluator full" $?
"$bin" search --model mlp:layers=2,hidden=128 --batch 64 --topology topologies/p100x16.json --budget 200 --out "$tmp/sa.json" >/dev/null 2>&1; check "search with auto" $?
cmp -s "$tmp/sf.json" "$tmp/sa.json"; check "same plan, byte for byte" $?
"$bin" search --model alexnet --topology topologies/p100x16.json --budget 300 --out "$tmp/sy.json" --evaluator symmetry --json >"$tmp/sy.out" 2>/dev/null; check "search --evaluator symmetry" $?
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['search']['infeasible'] > 0" "$tmp/sy.out"; check "forced symmetry rejects the asymmetric proposals" $?
"$bin" search --model mlp:layers=2,hidden=128 --topology topologies/p100x16.json --evaluator nope --out "$tmp/sx.json" >"$tmp/e" 2>&1; [ $? -eq 2 ] && [ ! -e "$tmp/sx.json" ]; check "search: unknown evaluator exits 2, nothing written" $?

echo "$fail failure(s)"
[ "$fail" -eq 0 ]
