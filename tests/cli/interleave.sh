#!/usr/bin/env bash
# Interleaved 1F1B end to end: megatron:...,vp=2 simulates, differs from
# vp=1, survives a round trip through a written plan file (same
# iteration time), the old mb= (micro-batch count) still equals the
# matching mbs= (size), and bad vp values or virtual_stages in a plan
# file exit 2 with a message naming the problem.
. "$(dirname "$0")/lib/common.sh"
has() { # has DESCRIPTION PATTERN FILE
  grep -q -- "$2" "$3" || { echo "FAIL $1: no \"$2\" in: $(head -c 300 "$3")"; fail=$((fail + 1)); }
}
iter() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iteration_time_ms"])' "$1"; }

model=gpt:layers=8,hidden=256,heads=4,seq=128
base=(--model "$model" --topology topologies/dgx-a100.json --batch 16)

check_rc "vp=2 simulate" 0 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,mbs=1,vp=2 --json
cp "$tmp/out" "$tmp/vp2.json"
check_rc "vp=1 simulate" 0 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,mbs=1 --json
cp "$tmp/out" "$tmp/vp1.json"
t1=$(iter "$tmp/vp1.json")
t2=$(iter "$tmp/vp2.json")
[ "$t1" != "$t2" ] || { echo "FAIL vp=2 gives the vp=1 time $t1"; fail=$((fail + 1)); }

check_rc "vp=2 plan --out" 0 "$bin" plan "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,mbs=1,vp=2 \
  --out "$tmp/p.json"
has "plan summary" "4 stages (2 pipeline ranks x 2 virtual stages)" "$tmp/out"
python3 - "$tmp/p.json" <<'PY' || { echo "FAIL plan file settings"; fail=$((fail + 1)); }
import json, sys
p = json.load(open(sys.argv[1]))
s = p["settings"]
assert s["virtual_stages"] == 2 and s["stages"] == 4 and s["microbatches"] == 8, s
assert s["schedule"] == "1f1b"
PY
check_rc "vp=2 plan --json" 0 "$bin" plan "${base[@]}" --plan "$tmp/p.json" --json
cp "$tmp/out" "$tmp/summary.json"
python3 - "$tmp/summary.json" <<'PY' || { echo "FAIL plan --json stages"; fail=$((fail + 1)); }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["virtual_stages"] == 2, d.get("virtual_stages")
assert [st["devices"] for st in d["stages"]] == [4, 4, 4, 4], d["stages"]
PY
check_rc "vp=2 plan file simulate" 0 "$bin" simulate "${base[@]}" --plan "$tmp/p.json" --json
cp "$tmp/out" "$tmp/file.json"
[ "$(iter "$tmp/file.json")" = "$t2" ] || { echo "FAIL plan file gives $(iter "$tmp/file.json"), spec $t2"; fail=$((fail + 1)); }

# the old mb= (count) and mbs= (size): batch 16 / (dp 2 * mbs 1) = 8 micro-batches
check_rc "mb=8 vp=2" 0 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,mb=8,vp=2 --json
cp "$tmp/out" "$tmp/mb.json"
[ "$(iter "$tmp/mb.json")" = "$t2" ] || { echo "FAIL mb=8 differs from mbs=1"; fail=$((fail + 1)); }

check_rc "vp=0" 2 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,vp=0
has "vp=0 message" "for vp" "$tmp/err"
check_rc "vp with pp=1" 2 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=1,dp=4,vp=2
has "pp=1 message" "needs pp > 1" "$tmp/err"
check_rc "layers not divisible" 2 "$bin" simulate "${base[@]}" --plan megatron:tp=2,pp=2,dp=2,vp=3
has "layers message" "do not divide into pp\*vp" "$tmp/err"
check_rc "micro-batches not a multiple of pp" 2 "$bin" simulate "${base[@]}" \
  --plan megatron:tp=2,pp=2,dp=2,mb=1,vp=2
has "mb message" "not a multiple of pp=2" "$tmp/err"

sed 's/"virtual_stages": 2/"virtual_stages": 3/' "$tmp/p.json" >"$tmp/bad3.json"
check_rc "plan file virtual_stages 3" 2 "$bin" simulate "${base[@]}" --plan "$tmp/bad3.json"
has "virtual_stages 3 message" "bad3.json.*virtual_stages" "$tmp/err"
sed 's/"virtual_stages": 2/"virtual_stages": "two"/' "$tmp/p.json" >"$tmp/badtype.json"
check_rc "plan file virtual_stages string" 2 "$bin" simulate "${base[@]}" --plan "$tmp/badtype.json"
has "virtual_stages type message" "virtual_stages" "$tmp/err"

echo "interleave: $fail failure(s)"
[ "$fail" -eq 0 ]
