#!/usr/bin/env bash
# simsearch swarm end to end on topologies/volunteers40.json: the report
# (text and --json with samples_per_s, step_time_s, averaging, peers,
# events), client-only peers reduce nothing, the LP is at least as fast as
# the equal split, churn is deterministic per seed and shows as events,
# local SGD, the refusals (bad specs, a topology without peers) exit 2;
# the what-if (lists in --target-batch, --peers, --bandwidth-scale): its
# points equal the single runs, infeasible points are reported, CSV columns,
# the plot's series, and the refusals of bad lists and of --csv without one.
. "$(dirname "$0")/lib/common.sh"
M="bert:layers=4,hidden=256,heads=4,seq=128"
T=topologies/volunteers40.json
run() { "$bin" swarm --model "$M" --topology "$T" --target-batch 1024 --duration 900 "$@"; }

out=$(run 2>&1); rc=$?
check "text report" $((rc != 0))
grep -q "throughput: .* samples/s" <<<"$out"; check "text: throughput line" $?
grep -q "^peer39 *K80" <<<"$out"; check "text: one row per peer" $?

run --json >"$tmp/lp.json"; check "--json" $?
python3 - "$tmp/lp.json" <<'PY'; check "--json fields, client-only shares 0" $?
import json, sys
r = json.load(open(sys.argv[1]))
assert r["samples_per_s"] > 0 and r["step_time_s"] > 0, r
assert r["averaging"]["method"] == "lp"
assert len(r["peers"]) == 40
clients = [p for p in r["peers"] if not p["accepts_connections"]]
assert len(clients) == 12 and all(p["averaging_share"] == 0 for p in clients)
assert any(e["kind"] == "round" for e in r["events"])
assert abs(sum(p["compute_share"] for p in r["peers"]) - 1) < 1e-9
PY

run --json --averaging equal >"$tmp/eq.json"; check "--averaging equal" $?
python3 -c "
import json,sys
a=json.load(open('$tmp/lp.json')); b=json.load(open('$tmp/eq.json'))
sys.exit(0 if a['samples_per_s'] >= b['samples_per_s'] else 1)"; check "LP at least as fast as equal" $?

run --json --churn leave=2,join=4 --seed 7 >"$tmp/c1.json"; check "--churn" $?
run --json --churn leave=2,join=4 --seed 7 >"$tmp/c2.json"
cmp -s "$tmp/c1.json" "$tmp/c2.json"; check "churn deterministic per seed" $?
grep -q '"kind": "leave"' "$tmp/c1.json"; check "churn: leave events" $?
run --strategy local-sgd:4 --compress int8 >/dev/null; check "--strategy local-sgd:4 --compress int8" $?

for bad in "--averaging tree" "--churn leave=x" "--churn stay=1" "--strategy local-sgd:0" \
           "--strategy diloco" "--compress fp8" "--target-batch 0"; do
  run $bad >/dev/null 2>&1; rc=$?
  check "refused: $bad (exit $rc)" $((rc != 2))
done
"$bin" swarm --model "$M" --topology topologies/dgx-a100.json --target-batch 64 2>"$tmp/err"
rc=$?; check "non-peer topology exits 2" $((rc != 2))
grep -q "not an internet peer" "$tmp/err"; check "non-peer topology: message" $?
run --churn leave=2,join=4 --plot "$tmp/t.svg" >/dev/null && grep -q "<svg" "$tmp/t.svg"; check "--plot FILE.svg" $?
run --plot "$tmp/t.pdf" >/dev/null 2>&1; rc=$?; check "--plot .pdf refused" $((rc != 2))
"$bin" swarm --help | grep -q -- "--target-batch"; check "--help" $?

# what-if
runw() { "$bin" swarm --model "$M" --topology "$T" --duration 900 "$@"; }
runw --target-batch 512,1024 --peers 10,40 --bandwidth-scale 1,2 --json >"$tmp/w.json"
check "what-if --json" $?
run --bandwidth-scale 2 --json >"$tmp/w1.json"
python3 - "$tmp/w.json" "$tmp/lp.json" "$tmp/w1.json" <<'PY'; check "what-if points = single runs" $?
import json, sys
w, single, w1 = (json.load(open(f)) for f in sys.argv[1:])
single2 = w1["points"][0]  # a one-point what-if: bandwidth x 2
assert w["axes"] == {"peers": [10, 40], "bandwidth_scale": [1.0, 2.0], "target_batch": [512, 1024]}
pts = w["points"]
assert len(pts) == 8 and all(p["feasible"] for p in pts)
assert [(p["peers"], p["bandwidth_scale"], p["target_batch"]) for p in pts][:3] == [
    (10, 1.0, 512), (10, 1.0, 1024), (10, 2.0, 512)]
for p, s in ((pts[5], single), (pts[7], single2)):
    assert p["peers"] == 40 and p["target_batch"] == 1024
    assert p["samples_per_s"] == s["samples_per_s"] and p["step_time_s"] == s["step_time_s"]
    assert p["rounds"] == s["rounds"]
assert pts[7]["samples_per_s"] > pts[5]["samples_per_s"]
PY
out=$(runw --target-batch 512,1024 --peers 10,40 2>&1); check "what-if table" $?
grep -q "^ *40 *1 *1024 " <<<"$out"; check "what-if table: one row per point" $?
cat >"$tmp/three.json" <<'J'
{"format": "simsearch-topology", "version": 1, "name": "three", "peers": [
 {"name": "c0", "type": "T4", "up_mbps": 20, "down_mbps": 100, "accepts_connections": false, "latency_ms": 10},
 {"name": "c1", "type": "T4", "up_mbps": 20, "down_mbps": 100, "accepts_connections": false, "latency_ms": 10},
 {"name": "s2", "type": "T4", "up_mbps": 50, "down_mbps": 100, "accepts_connections": true, "latency_ms": 10}]}
J
"$bin" swarm --model "$M" --topology "$tmp/three.json" --target-batch 256 --duration 600 \
  --peers 2,3 --csv "$tmp/w.csv" --plot "$tmp/w.svg" >"$tmp/three.txt"
check "what-if --csv --plot" $?
grep -q "infeasible: .*accepts connections" "$tmp/three.txt"; check "infeasible point in the table" $?
python3 - "$tmp/w.csv" "$tmp/w.svg" <<'PY'; check "CSV columns and rows; plot series" $?
import csv, html, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert list(rows[0].keys()) == ["peers", "bandwidth_scale", "target_batch", "feasible",
    "samples_per_s", "step_time_s", "averaging_s", "rounds", "aborts", "lost_samples",
    "peers_missing_rounds", "compute_util", "why"], rows[0].keys()
assert len(rows) == 2
assert rows[0]["feasible"] == "0" and "accepts connections" in rows[0]["why"]
assert rows[0]["samples_per_s"] == ""
assert rows[1]["feasible"] == "1" and float(rows[1]["samples_per_s"]) > 0
svg = html.unescape(open(sys.argv[2]).read())
assert "<svg" in svg and "throughput against the number of peers" in svg and "lp" in svg
PY
run --csv "$tmp/x.csv" >/dev/null 2>&1; rc=$?; check "--csv without a list refused" $((rc != 2))
for bad in "--peers 0" "--peers 41" "--peers 10," "--bandwidth-scale 0" "--bandwidth-scale x"; do
  run $bad >/dev/null 2>&1; rc=$?
  check "refused: $bad (exit $rc)" $((rc != 2))
done
for bad in "--target-batch 512,,1024" "--target-batch 512,0" "--target-batch ,512"; do
  runw $bad >/dev/null 2>&1; rc=$?
  check "refused: $bad (exit $rc)" $((rc != 2))
done
exit $((fail > 0))
