#!/usr/bin/env bash
# End-to-end checks of `simsearch cost` and `simsearch plan`: help, exit
# codes, the table and its totals, JSON output, and plan --out round trips.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
topo=topologies/p100x16.json

"$bin" cost --help >"$tmp/h" 2>&1; check "cost --help exits 0" $?
grep -q "usage: simsearch cost" "$tmp/h"; check "cost --help prints usage" $?
"$bin" plan --help >"$tmp/h" 2>&1; check "plan --help exits 0" $?

"$bin" cost --model mlp >/dev/null 2>&1; [ $? -eq 2 ]; check "cost without --topology exits 2" $?
"$bin" cost --model mlp --topology $topo --bogus >/dev/null 2>&1; [ $? -eq 2 ]; check "cost unknown option exits 2" $?
"$bin" cost --model nosuchmodel --topology $topo >/dev/null 2>&1; [ $? -eq 2 ]; check "cost bad model exits 2" $?
"$bin" cost --model mlp --topology $topo --device-type NoSuchGPU >/dev/null 2>&1; [ $? -eq 2 ]; check "cost bad device type exits 2" $?

"$bin" cost --model inception_v3 --topology $topo >"$tmp/t" 2>"$tmp/e"; check "cost inception_v3 exits 0" $?
grep -q "^total: forward" "$tmp/t"; check "cost prints totals" $?
grep -q "conv2d" "$tmp/t" && grep -q "analytic" "$tmp/t"; check "cost table has conv2d rows with a source" $?

# mlp on 16 P100s: each device gets 64 samples; fc1 is 64x1024x1024 -> 0.134 GFLOPs
"$bin" cost --model mlp --topology $topo >"$tmp/m" 2>&1; check "cost mlp exits 0" $?
grep -E "^fc1 +linear +64x1024 +0\.134 " "$tmp/m" >/dev/null; check "cost mlp fc1 row: 64x1024 tile, 0.134 GFLOPs" $?

"$bin" cost --model mlp --topology $topo --json >"$tmp/j" 2>&1; check "cost --json exits 0" $?
python3 - "$tmp/j" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ops = d["operators"]
assert d["model"] == "mlp" and d["devices"] == 16 and d["batch"] == 1024
fc1 = [o for o in ops if o["name"] == "fc1"][0]
assert fc1["output_shape"] == [64, 1024], fc1
assert abs(fc1["fwd_flops"] - (2 * 64 * 1024 * 1024 + 64 * 1024)) < 1, fc1
assert abs(sum(o["fwd_us"] for o in ops) - d["totals"]["fwd_us"]) < 1e-6
assert d["totals"]["parameters"] > 3000000
EOF
check "cost --json: fields, fc1 FLOPs, totals add up" $?

"$bin" cost --model mlp --topology $topo --device-type A100-SXM4-80GB >"$tmp/a" 2>&1; check "cost with a built-in device type" $?
grep -q "device type A100-SXM4-80GB" "$tmp/a"; check "cost names the device type" $?

"$bin" plan --model mlp --topology $topo --plan data-parallel --out "$tmp/dp.json" >"$tmp/p" 2>&1; check "plan data-parallel --out exits 0" $?
grep -q "devices used: 16 of 16" "$tmp/p"; check "plan summary: 16 devices used" $?
"$bin" plan --model mlp --topology $topo --plan "$tmp/dp.json" >/dev/null 2>&1; check "written plan loads back" $?
# the writer gives regular device lists as meshes (docs/plan-format.md); the
# fixture has explicit lists: equal once the meshes are expanded
python3 - "$tmp/dp.json" tests/data/plans/mlp_p100x16_dp.json <<'PY'; check "written plan equals the fixture" $?
import itertools, json, sys
def expand(d):
    if isinstance(d, list):
        return d
    return [d["offset"] + sum(i * s for i, s in zip(ix, d["strides"]))
            for ix in itertools.product(*[range(n) for n in d["shape"]])]
a, b = (json.load(open(f)) for f in sys.argv[1:])
meshes = 0
for plan in (a, b):
    for op in plan["operators"].values():
        meshes += isinstance(op["devices"], dict)
        op["devices"] = expand(op["devices"])
sys.exit(a != b or meshes == 0)
PY
"$bin" plan --model mlp --batch 512 --topology $topo --plan "$tmp/dp.json" >/dev/null 2>"$tmp/e"; [ $? -eq 2 ]; check "plan for another batch refused (exit 2)" $?
grep -q "was made for model mlp" "$tmp/e"; check "refusal names the model" $?

spec=megatron:tp=2,pp=2,dp=4
gpt=gpt:layers=4,hidden=256,heads=4,seq=64,vocab=1000
"$bin" plan --model $gpt --topology $topo --plan $spec --json --out "$tmp/m.json" >"$tmp/mj" 2>&1; check "plan megatron --json exits 0" $?
python3 - "$tmp/mj" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["devices_used"] == 16 and len(d["stages"]) == 2 and d["microbatches"] == 8, d
assert d["split_kinds"].get("sample+reduction", 0) == 2 * 4 + 2, d["split_kinds"]
EOF
check "megatron summary: 2 stages, 8 micro-batches, 10 reduction-split ops" $?
"$bin" plan --model $gpt --topology $topo --plan "$tmp/m.json" >/dev/null 2>&1; check "megatron plan loads back" $?
"$bin" plan --model $gpt --topology $topo --plan megatron:tp=2,zz=1 >/dev/null 2>"$tmp/e"; [ $? -eq 2 ]; check "bad megatron key exits 2" $?
grep -q 'unknown key "zz"' "$tmp/e"; check "bad key is named" $?
"$bin" plan --model $gpt --topology $topo --plan megatron:tp=4,pp=4,dp=4 >/dev/null 2>"$tmp/e"; [ $? -eq 2 ]; check "too many devices exits 2" $?

# Device lists as meshes: a 64-GPU Megatron plan with 32 micro-batches is
# written as meshes (small), loads back to the same plan (written again byte
# for byte), and the old explicit form of the same plan loads to it too; a
# bad mesh is refused naming the operator and what was wrong.
big=(--model gpt:layers=4 --batch 256 --topology topologies/dgx-a100.json --nodes 8)
"$bin" plan "${big[@]}" --plan megatron:tp=8,pp=2,dp=4,mb=32 --out "$tmp/mesh.json" >/dev/null 2>&1
check "megatron plan with meshes written" $?
[ "$(stat -c %s "$tmp/mesh.json")" -lt 60000 ]; check "mesh plan file is small" $?
"$bin" plan "${big[@]}" --plan "$tmp/mesh.json" --out "$tmp/mesh2.json" >/dev/null 2>&1
cmp -s "$tmp/mesh.json" "$tmp/mesh2.json"; check "mesh plan loads and is written again identically" $?
python3 - "$tmp/mesh.json" "$tmp/explicit.json" <<'PY'; check "explicit form made" $?
import itertools, json, sys
p = json.load(open(sys.argv[1]))
for op in p["operators"].values():
    d = op["devices"]
    if isinstance(d, dict):
        op["devices"] = [d["offset"] + sum(i * s for i, s in zip(ix, d["strides"]))
                         for ix in itertools.product(*[range(n) for n in d["shape"]])]
json.dump(p, open(sys.argv[2], "w"))
PY
"$bin" plan "${big[@]}" --plan "$tmp/explicit.json" --out "$tmp/mesh3.json" >/dev/null 2>&1
cmp -s "$tmp/mesh.json" "$tmp/mesh3.json"; check "explicit lists load to the same plan" $?
badmesh() { # badmesh NAME PYTHON-EDIT EXPECTED-TEXT
  python3 - "$tmp/mesh.json" "$tmp/bad-$1.json" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
op = next(o for o in p["operators"].values() if isinstance(o["devices"], dict))
d = op["devices"]
exec(sys.argv[3])
json.dump(p, open(sys.argv[2], "w"))
PY
  "$bin" plan "${big[@]}" --plan "$tmp/bad-$1.json" >/dev/null 2>"$tmp/e"
  [ $? -eq 2 ] && grep -q "$3" "$tmp/e"; check "bad mesh ($1) refused: $3" $?
}
badmesh count 'd["shape"][0] += 1' "devices: tile count mismatch: the mesh has"
badmesh negative 'd["strides"][0] = -5' "the mesh reaches device -"
badmesh strides 'd["strides"].append(1)' "strides for .* axes"
badmesh key 'd["step"] = 1' 'unknown key "step"'

echo "cost/plan CLI: $fail failed"
[ "$fail" -eq 0 ]
