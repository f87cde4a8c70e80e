#!/usr/bin/env bash
# simsearch whatif end to end: every point of a sweep (device type swapped,
# NIC 400 Gb/s with its PCIe path) equals the single `simsearch --threads 1
# --no-tune-sync` run (a point keeps the planner's sync settings) with the
# same seed and level on a topology file written here with the same changes; the CSV header is the documented column list (--help); the
# JSON holds axes and points; the SVG and PNG plots are written without a
# display, with the scenario names as series; a point where nothing fits is
# reported with its shortfall; Ctrl-C keeps the finished points and reports
# the rest as not run; the refusals exit 2.
. "$(dirname "$0")/lib/common.sh"
M="gpt:layers=4,hidden=512,heads=8,seq=512"
T=topologies/dgx-a100.json
w() { "$bin" whatif --model "$M" --topology "$T" --batch 32 "$@"; }

w --nodes 1,2 --device-type A100-SXM4-80GB,H100 --inter-gbps 200,400 --seed 5 --threads 2 \
  --tokens 2B --price A100=1.5,H100=3 --json --csv "$tmp/w.csv" \
  --plot "$tmp/w.svg,$tmp/w.png" >"$tmp/w.json" 2>"$tmp/w.err"
check "sweep --json --csv --plot" $?
grep -q "points done" "$tmp/w.err"; check "progress line on stderr" $?

python3 - "$tmp" "$bin" "$M" <<'PY'; check "each point equals its single simsearch run" $?
import json, subprocess, sys
tmp, binary, model = sys.argv[1:4]
r = json.load(open(f"{tmp}/w.json"))
assert r["format"] == "simsearch-whatif" and r["points_done"] == 8 and not r["interrupted"], r
assert len(r["axes"]["scenarios"]) == 4
base = json.load(open("topologies/dgx-a100.json"))
for p in r["points"]:
    assert p["state"] == "fits", p
    t = json.loads(json.dumps(base))
    c = t["compact"]
    c["nodes"] = p["nodes"]
    c["device_type"] = p["device_type"]
    f = p["inter_gbit_per_s"] / 8 / c["inter"]["gbps"]
    c["inter"]["gbps"] *= f
    c["inter"]["pcie_gbps"] *= f
    assert abs(p["pcie_GB_per_s"] - c["inter"]["pcie_gbps"]) < 1e-9, p
    open(f"{tmp}/t.json", "w").write(json.dumps(t))
    out = subprocess.run([binary, "--model", model, "--topology", f"{tmp}/t.json", "--batch",
                          "32", "--level", "0", "--threads", "1", "--seed", "5", "--no-tune-sync", "--json",
                          "--out", f"{tmp}/p.json"], capture_output=True, text=True, check=True)
    s = json.loads(out.stdout)
    assert s["best"]["iteration_time_ms"] == p["iteration_time_ms"], (s["best"], p)
    assert s["plan_spec"] == p["plan"], (s["plan_spec"], p["plan"])
    assert abs(p["days"] - 2e9 / p["tokens_per_s"] / 86400) < 1e-9 * p["days"]
    price = 3 if p["device_type"] == "H100-SXM" else 1.5
    assert abs(p["cost_usd"] - p["days"] * 24 * p["gpus"] * price) < 1e-6 * p["cost_usd"]
h = [p for p in r["points"] if p["device_type"] == "H100-SXM" and p["inter_gbit_per_s"] == 400]
assert "A100-SXM4-80GB -> H100-SXM" in h[0]["changes"] and "PCIe path" in h[0]["changes"]
PY

python3 - "$tmp/w.csv" "$bin" <<'PY'; check "CSV header = the documented columns, one row per point" $?
import csv, re, subprocess, sys
rows = list(csv.reader(open(sys.argv[1])))
help_text = subprocess.run([sys.argv[2], "whatif", "--help"], capture_output=True,
                           text=True).stdout
doc = help_text.split("CSV columns")[1].split(":", 1)[1].split("Exit status")[0]
doc = re.sub(r"\([^)]*\)", "", doc)
documented = [c.strip().split(" ")[0] for c in doc.replace("\n", " ").rstrip(". ").split(",")]
assert rows[0] == documented, (rows[0], documented)
assert len(rows) == 9 and all(len(r) == len(rows[0]) for r in rows)
assert {r[rows[0].index("state")] for r in rows[1:]} == {"fits"}
PY

python3 - "$tmp/w.svg" "$tmp/w.png" <<'PY'; check "plots: SVG with the series names, PNG" $?
import html, sys
svg = html.unescape(open(sys.argv[1]).read())
assert svg.startswith("<?xml") and "</svg>" in svg and len(svg) > 10000
for s in ["A100-SXM4-80GB, 200 Gb/s", "H100-SXM, 400 Gb/s", "Throughput against GPUs",
          "Pareto frontier", "global batch 32", "tokens/s"]:
    assert s in svg, s
png = open(sys.argv[2], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000
PY

out=$(w --nodes 1,2 --device-type H100 2>&1); check "text report" $?
[ "$(grep -c "^H100-SXM, batch 32  *[0-9]* tp[0-9]* pp[0-9]* dp[0-9]*" <<<"$out")" = 2 ]; check "table: a row per point" $?
grep -q "device A100-SXM4-80GB -> H100-SXM" <<<"$out"; check "what changed is printed" $?

# a 51B GPT on one node (weights and Adam state ~820 GB > 8 x 80 GiB): no plan
# fits; reported with the shortfall, not dropped
"$bin" whatif --model gpt:layers=16,hidden=16384,heads=128,seq=512 --batch 8 --topology "$T" \
  --nodes 1 --budget 10 --json >"$tmp/nf.json" 2>/dev/null
check "no-fit sweep exits 0" $?
python3 -c "
import json,sys
p=json.load(open('$tmp/nf.json'))['points']
assert len(p)==1 and p[0]['state']=='no-fit' and p[0]['shortfall_bytes']>0 and p[0]['iteration_time_ms'] is None, p
"; check "no-fit point with its shortfall" $?

# Ctrl-C: finished points kept, the rest not run
"$bin" whatif --model gpt:layers=96,hidden=12288,heads=96,seq=2048 --batch 1536 --topology "$T" \
  --nodes 32..512 --threads 1 --json >"$tmp/int.json" 2>"$tmp/int.err" &
pid=$!
sleep 3
kill -INT $pid
wait $pid
check "interrupted sweep exits 0" $?
python3 -c "
import json
r=json.load(open('$tmp/int.json'))
assert r['interrupted'] and r['points_done'] < 5, r
st=[p['state'] for p in r['points']]
assert set(st) <= {'fits','not-run'} and st.count('fits') == r['points_done'], st
assert st == sorted(st, key=lambda s: s != 'fits'), st
"; check "Ctrl-C keeps the finished points" $?
grep -q "interrupted" "$tmp/int.err"; check "Ctrl-C said on stderr" $?

refuse() { # description, expected text, args...
  local what=$1 text=$2; shift 2
  local o; o=$("$bin" whatif "$@" 2>&1); local rc=$?
  [ $rc -eq 2 ] && grep -q -- "$text" <<<"$o"; check "refused: $what" $?
}
refuse "bad node range" "--nodes" --model "$M" --topology "$T" --nodes 0..4
refuse "price without tokens" "needs --tokens" --model "$M" --topology "$T" --price H100=2
refuse "explicit topology" "compact" --model "$M" --topology topologies/local-cpu.json
refuse "plot extension" ".svg or .png" --model "$M" --topology "$T" --plot "$tmp/x.pdf"
refuse "both inter options" "both given" --model "$M" --topology "$T" --inter-gbps 400 \
  --inter-scale 2
refuse "ambiguous device type" "names several" --model "$M" --topology "$T" --device-type A100
refuse "price for no device of the sweep" "B200" --model "$M" --topology "$T" --nodes 1 \
  --tokens 1B --price B200=5
refuse "precision" "bf16, fp16 or fp8" --model "$M" --topology "$T" --precision fp4
exit $((fail > 0))
