#!/usr/bin/env bash
# End-to-end checks of `simsearch profile` and of --db: usage errors exit 2,
# a missing CUDA device exits 1, a plan's tiles are measured into a strict
# database, a second run resumes (measures nothing), --candidates covers
# more tiles, and simulate / cost / search read the database (cost_sources,
# per-operator sources).
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
export OPENBLAS_NUM_THREADS=1
topo=topologies/local-cpu.json
model="mlp:layers=2,hidden=64,in=32,classes=8"
db="$tmp/db.json"

"$bin" profile --help >"$tmp/h" 2>&1; check "profile --help exits 0" $?
grep -q "usage: simsearch profile" "$tmp/h"; check "profile --help prints usage" $?
"$bin" profile --model "$model" >/dev/null 2>&1; [ $? -eq 2 ]; check "profile without --topology exits 2" $?
"$bin" profile --model "$model" --topology $topo --plan data-parallel --candidates >/dev/null 2>&1; [ $? -eq 2 ]
check "--plan with --candidates exits 2" $?
"$bin" profile --model "$model" --topology $topo --device tpu >/dev/null 2>&1; [ $? -eq 2 ]; check "bad --device exits 2" $?
"$bin" profile --model "$model" --topology $topo --reps 0 >/dev/null 2>&1; [ $? -eq 2 ]; check "--reps 0 exits 2" $?
"$bin" profile --model "$model" --topology $topo --device-type H100 >/dev/null 2>&1; [ $? -eq 2 ]
check "device type not in the topology exits 2" $?
"$bin" profile --model "$model" --topology $topo --db tests/data/bad/profile_syntax.json >/dev/null 2>"$tmp/e"; [ $? -eq 2 ]
check "a malformed database exits 2" $?
grep -q "profile_syntax.json:4:" "$tmp/e"; check "... naming file and line" $?
"$bin" profile --model "$model" --topology $topo --device cuda:0 --db "$db" >/dev/null 2>"$tmp/e"; [ $? -eq 1 ]
check "profile --device cuda:0 without a GPU exits 1" $?
grep -q "no CUDA device 0" "$tmp/e"; check "... and says there is no CUDA device" $?
[ ! -e "$db" ]; check "... and writes no database" $?

"$bin" profile --model "$model" --topology $topo --db "$db" --reps 3 >"$tmp/o" 2>&1; check "profile exits 0" $?
grep -q "5 to measure" "$tmp/o"; check "5 distinct tiles (3 linear shapes, relu, loss)" $?
n=$(grep -c "\"signature\"" "$db"); [ "$n" -eq 5 ]; check "database holds 5 entries ($n)" $?
"$bin" profile --model "$model" --topology $topo --db "$db" --reps 3 --warm-cache >"$tmp/o" 2>&1; check "second run exits 0" $?
grep -q "5 already in" "$tmp/o" && grep -q "measured 0 tiles; .* unchanged" "$tmp/o"; check "second run resumes: nothing measured" $?
gpt="gpt:layers=1,hidden=32,heads=2,seq=8,vocab=50"
"$bin" profile --model "$gpt" --topology $topo --db "$tmp/g.json" --reps 1 >"$tmp/o" 2>&1; check "profile of a bf16 model exits 0" $?
grep -q "skipped, not runnable on cpu (first: .*does not run bf16" "$tmp/o" && [ ! -e "$tmp/g.json" ]
check "... skips its bf16 tiles with the reason and writes nothing" $?
g32="gpt:layers=1,hidden=32,heads=2,seq=8,vocab=50,precision=fp32"
"$bin" profile --model "$g32" --topology $topo --db "$tmp/v.json" --reps 1 --warmup 0 --warm-cache >"$tmp/o" 2>&1
check "profile of an fp32 GPT exits 0" $?
! cat "$tmp/v.json"* | grep -Eq '"op_type": *"(reshape|split)"'; check "... measures no views by default" $?
"$bin" profile --model "$g32" --topology $topo --db "$tmp/v.json" --reps 1 --warmup 0 --warm-cache --views >"$tmp/o" 2>&1
check "profile --views exits 0" $?
cat "$tmp/v.json"* | grep -Eq '"op_type": *"reshape"' && cat "$tmp/v.json"* | grep -Eq '"op_type": *"split"'
check "... adds the reshapes' and splits' copies" $?
python3 - "$tmp/v.json" "$bin" "$g32" $topo <<'PY'; check "... which the cost model then takes from the profile" $?
import json, subprocess, sys
db, b, m, t = sys.argv[1:]
r = subprocess.run([b, "cost", "--model", m, "--topology", t, "--db", db], capture_output=True, text=True)
rows = [l.split() for l in r.stdout.splitlines() if "merge" in l or "qkv_reshape" in l]
sys.exit(0 if r.returncode == 0 and rows and all(l[-1] == "profile" for l in rows) else 1)
PY
"$bin" profile --model "$model" --topology $topo --db "$db" --reps 2 --candidates --warm-cache --cpu-time >"$tmp/o" 2>&1; check "--candidates exits 0" $?
n=$(grep -c '"signature"' "$db"); [ "$n" -gt 5 ]; check "--candidates adds the other tilings ($n entries)" $?

"$bin" simulate --model "$model" --topology $topo --plan data-parallel --db "$db" --json >"$tmp/s" 2>&1
check "simulate --db exits 0" $?
python3 - "$tmp/s" <<'PY'; check "simulate --json cost_sources is {profile: 1}" $?
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["cost_sources"] == {"profile": 1.0} else 1)
PY
"$bin" simulate --model "$model" --topology $topo --plan data-parallel --json >"$tmp/s" 2>&1
python3 - "$tmp/s" <<'PY'; check "simulate without --db: cost_sources is {analytic: 1}" $?
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r["cost_sources"] == {"analytic": 1.0} else 1)
PY
"$bin" simulate --model "$model" --topology $topo --plan data-parallel --db "$tmp/none.json" >/dev/null 2>&1; [ $? -eq 2 ]
check "simulate --db missing file exits 2" $?
"$bin" cost --model "$model" --topology $topo --db "$db" >"$tmp/c" 2>&1; check "cost --db exits 0" $?
grep -E "^fc1 .* profile$" "$tmp/c" >/dev/null && grep -E "^x .* analytic$" "$tmp/c" >/dev/null
check "cost shows each operator's source" $?
"$bin" search --model "$model" --topology $topo --db "$db" --budget 200 --time-limit 0 --out "$tmp/p.json" --json >"$tmp/r" 2>&1
check "search --db exits 0" $?
"$bin" search --model "$model" --topology $topo --db tests/data/bad/profile_duplicate.json --budget 10 --out "$tmp/p.json" >/dev/null 2>&1; [ $? -eq 2 ]
check "search --db malformed exits 2" $?

echo "$fail failure(s)"
[ $fail -eq 0 ]
