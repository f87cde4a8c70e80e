#!/usr/bin/env bash
# simsearch swarm end to end on topologies/volunteers40.json: the report
# (text and --json with samples_per_s, step_time_s, averaging, peers,
# events), client-only peers reduce nothing, the LP is at least as fast as
# the equal split, churn is deterministic per seed and shows as events,
# local SGD, and the refusals (bad specs, a topology without peers) exit 2.
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
exit $((fail > 0))
