#!/usr/bin/env bash
# A plan stays small in memory (issue 19, item 5): ops whose tiles sit on
# the same devices share one device list (core/devpool.h), so the GPT-3 175B
# Megatron plan on 1,024 A100s (2,122 operators x 12,288 tiles) holds one
# list per pipeline stage and at most 1 MB; `simsearch plan` reports it. A
# plan written with explicit device arrays (the old form) loads into the
# same pooled plan as its mesh form.
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"

"$bin" plan --model gpt:layers=96,hidden=12288,heads=96,seq=2048 --batch 1536 \
  --topology topologies/dgx-a100.json --nodes 128 \
  --plan megatron:tp=8,pp=16,dp=8,mb=192,recompute=full --json >"$tmp/big.json" 2>"$tmp/e"
check "plan 175B / 1,024 GPUs exits 0" $?
python3 - "$tmp/big.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["operators"] == 2122 and d["max_tiles"] == 12288 and d["devices_used"] == 1024, d
assert d["device_lists"] == 16, d["device_lists"]           # one per pipeline stage
assert 0 < d["plan_bytes"] <= 1 << 20, d["plan_bytes"]      # <= 1 MB (arrays: 104 MB)
print("175B plan: %d bytes, %d device lists" % (d["plan_bytes"], d["device_lists"]))
PY
check "175B plan: 16 device lists, at most 1 MB in memory" $?

# the old explicit form: every list written as an array
model=gpt:layers=4,hidden=256,heads=4,seq=64,vocab=1000
common="--model $model --batch 64 --topology topologies/dgx-a100.json --nodes 4"
"$bin" plan $common --plan megatron:tp=4,pp=2,dp=4,mb=8 --out "$tmp/mesh.json" \
  >/dev/null 2>&1; check "plan --out (mesh form) exits 0" $?
python3 - "$tmp/mesh.json" "$tmp/explicit.json" <<'PY'
import itertools, json, sys
d = json.load(open(sys.argv[1]))
meshes = 0
for op in d["operators"].values():
    m = op["devices"]
    if isinstance(m, dict):
        meshes += 1
        op["devices"] = [m["offset"] + sum(i * s for i, s in zip(ix, m["strides"]))
                         for ix in itertools.product(*[range(n) for n in m["shape"]])]
assert meshes > 10, meshes
json.dump(d, open(sys.argv[2], "w"))
PY
check "explicit form written" $?
"$bin" plan $common --plan "$tmp/mesh.json" --json >"$tmp/m.json" 2>&1; check "mesh form loads" $?
"$bin" plan $common --plan "$tmp/explicit.json" --json >"$tmp/x.json" 2>&1; check "explicit form loads" $?
python3 - "$tmp/m.json" "$tmp/x.json" <<'PY'
import json, sys
m, x = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert x["plan_bytes"] == m["plan_bytes"] and x["device_lists"] == m["device_lists"], (m, x)
assert x["device_lists"] < x["operators"] / 4, x
del m["plan"], x["plan"]
assert m == x
PY
check "both forms: the same plan, the same lists, the same bytes" $?

echo "plan memory CLI: $fail failed"
[ "$fail" -eq 0 ]
