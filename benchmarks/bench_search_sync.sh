#!/usr/bin/env bash
# The search with and without the tuning of its final plan's gradient-sync
# settings (issue 31 item 3; benchmarks/RESULTS.md, "Search"), for
# FlexFlow's six models on p100x16 and k80x64. Usage:
#   benchmarks/bench_search_sync.sh BEFORE_BIN AFTER_BIN [BUDGET] [SEED]
# BEFORE_BIN: a simsearch built without the tuning (e.g. main at ae7438b);
# AFTER_BIN: one with it. Each pair runs `search --budget BUDGET --seed SEED`
# (no time limit: reproducible) with both binaries, one after the other;
# prints the iteration time of the plan each writes, the process CPU seconds
# (user + sys) and the tuning's simulations and seconds (from --json).
set -eu
before=${1:?usage: bench_search_sync.sh BEFORE_BIN AFTER_BIN [BUDGET] [SEED]}
after=${2:?usage: bench_search_sync.sh BEFORE_BIN AFTER_BIN [BUDGET] [SEED]}
budget=${3:-300}
seed=${4:-1}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-13s %-8s %10s %10s %7s %8s %8s %6s %7s  %s\n' model topology before_ms after_ms gain \
  cpu_b_s cpu_a_s sims tune_s settings
for topo in ${TOPOLOGIES:-p100x16 k80x64}; do
  for model in ${MODELS:-alexnet inception_v3 resnet101 rnntc rnnlm nmt}; do
    for w in before after; do
      bin=$before
      [ "$w" = after ] && bin=$after
      /usr/bin/time -f "%U %S" -o "$tmp/$w.time" "$bin" search --model "$model" \
        --topology "topologies/$topo.json" --budget "$budget" --seed "$seed" --json \
        --out "$tmp/$w.plan.json" >"$tmp/$w.json" 2>/dev/null
    done
    python3 - "$model" "$topo" "$tmp" <<'PY'
import json, sys
model, topo, tmp = sys.argv[1:4]
def cpu(w):
    u, s = open("%s/%s.time" % (tmp, w)).read().split()[-2:]
    return float(u) + float(s)
b = json.load(open(tmp + "/before.json"))
a = json.load(open(tmp + "/after.json"))
tb, ta = b["best"]["iteration_time_ms"], a["best"]["iteration_time_ms"]
t = a["sync_tuning"]
s = t["settings"] or {}
sets = "bucket %.2f MB, priority %s, K %d, flags %s, %s" % (
    s.get("bucket_bytes", 0) / 1e6, "on" if s.get("priority") else "off", s.get("reorder_k", 0),
    "on" if s.get("synced_flags") else "off", s.get("sync", "-")) if t["changed"] else "unchanged"
print("%-13s %-8s %10.3f %10.3f %6.2f%% %8.2f %8.2f %6d %7.2f  %s" % (
    model, topo, tb, ta, 100 * (1 - ta / tb), cpu("before"), cpu("after"), t["evaluations"],
    t["time_s"], sets))
PY
  done
done
