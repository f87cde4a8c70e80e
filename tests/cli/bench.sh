#!/usr/bin/env bash
# Benchmark programs end to end on small inputs: bench_vtrain on 8 measured
# rows (tests/data/vtrain_small.csv, from vTrain's set) — its statistics
# are recomputed here independently from its --predictions CSV (MAPE,
# median, max, Spearman without ties) and must match the report; runs are
# deterministic; bad input exits non-zero. bench_sim measures one model. The
# plan analysis scripts plan_swap.py and plan_symmetry.py on small plans.
. "$(dirname "$0")/lib/common.sh"
dir=$(dirname "$bin")
err() { echo "FAIL $*"; fail=$((fail + 1)); }

"$dir/bench_vtrain" --csv tests/data/vtrain_small.csv --topology benchmarks/vtrain-a100x8.json \
  --predictions "$tmp/p1.csv" --markdown "$tmp/r1.md" >"$tmp/out" 2>&1 || err "bench_vtrain exit $?"
"$dir/bench_vtrain" --csv tests/data/vtrain_small.csv --topology benchmarks/vtrain-a100x8.json \
  --predictions "$tmp/p2.csv" --markdown "$tmp/r2.md" >/dev/null 2>&1 || err "bench_vtrain second run"
cmp -s "$tmp/p1.csv" "$tmp/p2.csv" || err "predictions differ between two runs"
[ "$(wc -l <"$tmp/p1.csv")" -eq 9 ] || err "expected 8 predictions + header"
# every prediction positive, error column = (pred - meas) / meas
awk -F, 'NR > 1 { e = ($12 - $11) / $11 * 100; d = e - $13; if (!($12 > 0) || d > 0.01 || d < -0.01) bad++ }
         END { exit bad > 0 }' "$tmp/p1.csv" || err "prediction rows inconsistent"
# independent statistics: mean / median / max APE and Spearman (8 rows)
want=$(sort -t, -k12,12g "$tmp/p1.csv" | awk -F, '$1 != "gpus" { n++; p[n] = $12; m[n] = $11 }
  END {
    for (i = 1; i <= n; i++) { a[i] = (p[i] > m[i] ? p[i] - m[i] : m[i] - p[i]) / m[i] * 100; s += a[i]; rp[i] = i }
    for (i = 1; i <= n; i++) { r = 1; for (j = 1; j <= n; j++) if (m[j] < m[i]) r++; rm[i] = r }
    for (i = 1; i <= n; i++) { d = rp[i] - rm[i]; d2 += d * d }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    printf "%.2f %.2f %.2f %.3f", s / n, (a[n / 2] + a[n / 2 + 1]) / 2, a[n], 1 - 6 * d2 / (n * (n * n - 1)) }')
got=$(awk -F'|' '$2 ~ /^ all / { gsub(/ /, ""); print $4, $5, $7, $9 }' "$tmp/r1.md")
[ -n "$want" ] && [ "$want" = "$got" ] || err "report statistics: got '$got', recomputed '$want'"
grep -q "^| tp=1 pp=1 dp=2 |" "$tmp/r1.md" || err "no per-class table"
grep -q "^Worst 10 rows" "$tmp/r1.md" || err "no worst-rows table"
printf 'gpus,x\n2,16,8\n' >"$tmp/bad.csv"
if "$dir/bench_vtrain" --csv "$tmp/bad.csv" >/dev/null 2>"$tmp/e"; then err "bad CSV accepted"; fi
grep -q "bad row" "$tmp/e" || err "bad CSV message: $(cat "$tmp/e")"

"$dir/bench_sim" --only alexnet --markdown "$tmp/s.md" >/dev/null 2>&1 || err "bench_sim exit $?"
awk -F'|' '$2 ~ /alexnet/ { exit !($5 + 0 > 0 && $8 + 0 > 0) }' "$tmp/s.md" || err "bench_sim row: $(cat "$tmp/s.md")"

# The plan analysis scripts (docs/experiments.md, "Search") on mlp over one
# p100x16 node: data parallelism (A) against a searched plan (B).
topo="--topology topologies/p100x16.json --nodes 1 --model mlp"
# shellcheck disable=SC2086
"$bin" plan $topo --plan data-parallel --out "$tmp/a.json" >/dev/null 2>&1 || err "plan exit $?"
# shellcheck disable=SC2086
"$bin" search $topo --budget 400 --time-limit 0 --seed 7 --out "$tmp/b.json" >/dev/null 2>&1 ||
  err "search exit $?"
# plan_swap: taking every class that differs over from B gives B's time.
if python3 benchmarks/plan_swap.py "$bin" mlp topologies/p100x16.json "$tmp/a.json" "$tmp/b.json" \
    --nodes 1 >"$tmp/swap" 2>&1; then
  b_ms=$(awk 'NR == 1 { print $5 }' "$tmp/swap")
  last_ms=$(awk '$1 == "+" { v = $3 } END { print v }' "$tmp/swap")
  [ -n "$b_ms" ] && [ "$b_ms" = "$last_ms" ] || err "plan_swap: B $b_ms ms, all classes taken over $last_ms ms"
  grep -q "classes differ" "$tmp/swap" || err "plan_swap: no summary line"
else
  err "plan_swap exit: $(cat "$tmp/swap")"
fi
# plan_symmetry: data parallelism runs the same timeline on all 4 devices; a
# plan with one op moved onto device 0 alone does not.
# shellcheck disable=SC2086
"$bin" simulate $topo --plan "$tmp/a.json" --trace "$tmp/a.trace" >/dev/null 2>&1 ||
  err "simulate --trace exit $?"
python3 benchmarks/plan_symmetry.py "$tmp/a.trace" dp >"$tmp/sym" 2>&1 || err "plan_symmetry exit"
grep -q "dp: 4 devices, .*classes by work: 1 (largest 4), by timeline: 1 (largest 4)" "$tmp/sym" ||
  err "plan_symmetry on data parallelism: $(cat "$tmp/sym")"
python3 - "$tmp/a.json" "$tmp/c.json" <<'PY' || err "editing a plan"
import json, sys
p = json.load(open(sys.argv[1]))
op = sorted(p["operators"])[0]
c = p["operators"][op]
c["degrees"] = [1] * len(c["degrees"])
c["reduction"] = 1
c["devices"] = [0]
json.dump(p, open(sys.argv[2], "w"))
PY
# shellcheck disable=SC2086
"$bin" simulate $topo --plan "$tmp/c.json" --trace "$tmp/c.trace" >/dev/null 2>&1 ||
  err "simulate --trace (one op on device 0) exit $?"
python3 benchmarks/plan_symmetry.py "$tmp/c.trace" one >"$tmp/sym" 2>&1 || err "plan_symmetry exit"
grep -q "one: 4 devices, .*classes by work: [2-4] " "$tmp/sym" ||
  err "plan_symmetry on an asymmetric plan: $(cat "$tmp/sym")"

# bench_profile on a tiny MLP: the per-tile table, the iteration table and the
# summary line (exit 0 or 1: within or beyond 10% on a loaded machine; 2 is bad input)
OPENBLAS_NUM_THREADS=1 "$dir/bench_profile" --model mlp:layers=1,hidden=64,in=32,classes=4 \
  --batch 16 --rounds 3 --cpu-time --warm-cache >"$tmp/bp" 2>&1
rc=$?
[ $rc -le 1 ] || err "bench_profile exit $rc"
grep -q '^| fc1 | linear | 16x64 | 1 |' "$tmp/bp" || err "bench_profile: no row for fc1"
grep -q '^| simulated with the profile database (100% profile)' "$tmp/bp" || err "bench_profile: no simulated row"
grep -Eq '^SUMMARY [0-9.]+ [0-9.]+ [-+][0-9.]+ ' "$tmp/bp" || err "bench_profile: no SUMMARY line"
"$dir/bench_profile" --rounds 0 >/dev/null 2>&1; [ $? -eq 2 ] || err "bench_profile --rounds 0 should exit 2"
[ $fail -eq 0 ] && echo "bench: all checks passed"
exit $fail
