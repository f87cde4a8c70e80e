#!/usr/bin/env bash
# benchmarks/run.sh — the `make bench` entry: runs the benchmarks and updates
# their sections of benchmarks/RESULTS.md.
#
#   benchmarks/run.sh [--build DIR] [--only sim|accuracy|search|profile]... [--quick]
#
# Sections and what fills them:
#   "Simulator speed"     bench_sim (six FlexFlow models on p100x16, GPT on dgx-a100)
#   "Simulator accuracy"  bench_vtrain over vTrain's 1,440 single-node and 41
#                         multi-node measured Megatron runs
#   "Search"              benchmarks/bench_search.sh (engineer h7's)
#   "Profiler: analytic vs measured on the CPU"  benchmarks/bench_profile.sh (its own
#                         markers, at the end; per-operator tables in profile-cpu.md)
# Each run writes its figures between the markers
#   <!-- BEGIN <key> (benchmarks/run.sh) --> ... <!-- END <key> -->
# replacing only what is between them; without markers the block goes at the
# end of the section with that title, and without the section a new section
# is appended. Text outside the markers (hand-written notes, other sections)
# is kept as it is. --quick: bench_sim --quick and a 5 s search per model.
# Environment: SEARCH_SECONDS (default 20), VTRAIN_CSV (default
# ../shared/data/vtrain_ground_truth_single.csv relative to the repository),
# VTRAIN_MULTI_CSV (default ../shared/data/vtrain_ground_truth_multi_3.6B_18.4B.csv).
set -euo pipefail

cd "$(dirname "$0")/.."
build=${BUILD:-build}
only=()
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "usage: benchmarks/run.sh [--build DIR] [--only sim|accuracy|search|profile]... [--quick]" >&2
       exit 2 ;;
  esac
done
want() {
  [ ${#only[@]} -eq 0 ] && return 0
  local k
  for k in "${only[@]}"; do [ "$k" = "$1" ] && return 0; done
  return 1
}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target bench_sim bench_vtrain bench_search -j "$(nproc)" >/dev/null

results=benchmarks/RESULTS.md
[ -f "$results" ] || printf '# Benchmark results\n\nWritten by `make bench` (benchmarks/run.sh); text outside the generated blocks is kept.\n' >"$results"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)
machine="$(nproc) cores ($cpu), shared with other jobs; single-threaded runs"
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")

# splice KEY TITLE FILE: put FILE's text between KEY's markers in RESULTS.md.
splice() {
  python3 - "$results" "$1" "$2" "$3" <<'PY'
import re, sys
path, key, title, body_file = sys.argv[1:5]
text = open(path).read()
body = open(body_file).read().rstrip("\n")
begin = "<!-- BEGIN %s (benchmarks/run.sh) -->" % key
end = "<!-- END %s -->" % key
block = "%s\n%s\n%s" % (begin, body, end)
if begin in text and end in text:
    a = text.index(begin)
    b = text.index(end, a) + len(end)
    text = text[:a] + block + text[b:]
else:
    m = re.search(r"^## %s[ \t]*$" % re.escape(title), text, re.M)
    if m:
        nxt = re.search(r"^## ", text[m.end():], re.M)
        at = m.end() + nxt.start() if nxt else len(text)
        text = text[:at].rstrip("\n") + "\n\n" + block + "\n\n" + text[at:].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n## %s\n\n%s\n" % (title, block)
open(path + ".tmp", "w").write(text.rstrip("\n") + "\n")
PY
  mv "$results.tmp" "$results"
}

header() { # header COMMAND
  printf 'Command: `%s`  \nDate: %s  \nMachine: %s; build type %s.\n\n' "$1" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$machine" "$btype"
}

if want sim; then
  args=()
  [ $quick -eq 1 ] && args+=(--quick)
  cmd="$build/bench_sim${args[*]:+ ${args[*]}}"
  echo "== simulator speed: $cmd" >&2
  { header "$cmd"
    "$build/bench_sim" ${args[@]+"${args[@]}"} --markdown "$tmp/sim.md" || true
    cat "$tmp/sim.md"
    printf '\nTimes are per `ss_sim_run` on a reused simulator after one warm-up run (median); tasks per CPU second use CPU time, which the other jobs on this machine do not inflate. Peak RSS is that of the forked process that ran the case.\n'
  } >"$tmp/sim.block"
  splice sim "Simulator speed" "$tmp/sim.block"
fi

# condense MD: bench_vtrain's markdown for the results sheet: without the
# per-parallelism table (docs/calibration.md discusses it) and with the five
# worst rows only.
condense() {
  python3 - "$1" <<'PY'
import sys
out, skip, worst = [], False, -1
for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("By parallelism"):
        skip = True
        continue
    if skip and (line.startswith("By model size") or line.startswith("Worst")):
        skip = False
    if skip:
        continue
    if line.startswith("Worst"):
        line, worst = "Worst 5 rows:", 0
    elif worst >= 0 and line.startswith("|"):
        worst += 1
        if worst > 7:  # header, rule, five rows
            continue
    out.append(line)
print("\n".join(out))
PY
}

if want accuracy; then
  csv=${VTRAIN_CSV:-../shared/data/vtrain_ground_truth_single.csv}
  mcsv=${VTRAIN_MULTI_CSV:-../shared/data/vtrain_ground_truth_multi_3.6B_18.4B.csv}
  cmd="$build/bench_vtrain --csv $csv --topology benchmarks/vtrain-a100x8.json"
  mcmd="$build/bench_vtrain --csv $mcsv --topology benchmarks/vtrain-a100x8.json --jobs $(nproc)"
  echo "== simulator accuracy: $cmd; $mcmd" >&2
  { header "$cmd"
    printf 'Commit: %s\n\n### Single node (vTrain, 1,440 runs on 2-8 A100s)\n\n' "$(git rev-parse --short HEAD)"
    "$build/bench_vtrain" --csv "$csv" --topology benchmarks/vtrain-a100x8.json \
      --markdown "$tmp/acc.md" >"$tmp/acc.out"
    condense "$tmp/acc.md"
    printf '\nAPE = |predicted - measured| / measured; bias = mean signed error. Calibration: docs/calibration.md.\n'
    printf '\n### Multi-node (vTrain, 41 runs of 3.6B on 64 and 18.4B on 256 A100s)\n\nCommand: `%s`\n\n' "$mcmd"
    "$build/bench_vtrain" --csv "$mcsv" --topology benchmarks/vtrain-a100x8.json \
      --jobs "$(nproc)" --markdown "$tmp/macc.md" >"$tmp/macc.out"
    condense "$tmp/macc.md"
    printf '\nSpearman within each model size: the "By model size" table. One general parameter is fitted on this file: the InfiniBand collectives'"'"' bus-bandwidth efficiency (coll_eff of the inter fabric in benchmarks/vtrain-a100x8.json, on its tp = 16 rows); nothing is fitted per configuration, and the "calibration half" label is only the seeded split (docs/calibration.md).\n'
  } >"$tmp/acc.block"
  splice accuracy "Simulator accuracy" "$tmp/acc.block"
fi

if want search; then
  secs=${SEARCH_SECONDS:-20}
  [ $quick -eq 1 ] && secs=5
  cmd="benchmarks/bench_search.sh $build $secs"
  echo "== search: $cmd" >&2
  { header "$cmd"
    printf '```\n'
    bash benchmarks/bench_search.sh "$build" "$secs"
    printf '```\n'
  } >"$tmp/search.block"
  splice search "Search" "$tmp/search.block"
fi

if want profile; then
  echo "== profiler: benchmarks/bench_profile.sh" >&2
  bash benchmarks/bench_profile.sh --build "$build" >/dev/null
fi
echo "updated $results" >&2
