#!/usr/bin/env bash
# Benchmark programs end to end on small inputs: bench_vtrain on 8 measured
# rows (tests/data/vtrain_small.csv, from vTrain's set) — its statistics
# are recomputed here independently from its --predictions CSV (MAPE,
# median, max, Spearman without ties) and must match the report; runs are
# deterministic; bad input exits non-zero. bench_sim measures one model.
set -u
src=${SS_SOURCE_DIR:?}
bin=${SS_BINARY:?}
dir=$(dirname "$bin")
cd "$src"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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

[ $fail -eq 0 ] && echo "bench: all checks passed"
exit $fail
