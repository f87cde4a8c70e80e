#!/usr/bin/env bash
# benchmarks/run.sh — the `make bench` entry: runs the benchmarks and updates
# their sections of benchmarks/RESULTS.md.
#
#   benchmarks/run.sh [--build DIR] [--only sim|accuracy|search|profile|scale]... [--quick]
#
# Sections and what fills them:
#   "Simulator speed"     bench_sim (six FlexFlow models on p100x16, GPT on dgx-a100)
#   "Simulator accuracy"  bench_vtrain over vTrain's 1,440 single-node and 41
#                         multi-node measured Megatron runs (every table in
#                         accuracy-vtrain.md)
#   "Search"              benchmarks/bench_search.sh (engineer h7's)
#   "Scale"               benchmarks/bench_scale.sh (175B / 1T / 39.1B / BERT plans,
#                         FlexFlow's six; random 175B plans in scale-plans.md)
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
    *) echo "usage: benchmarks/run.sh [--build DIR] [--only sim|accuracy|search|profile|scale]... [--quick]" >&2
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
  local rev
  rev=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- . ':!benchmarks/RESULTS.md' ':!benchmarks/*.md' || rev="$rev + uncommitted changes"
  printf 'Command: `%s`  \nCommit: %s  \nDate: %s  \nMachine: %s; build type %s.\n\n' "$1" \
    "$rev" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$machine" "$btype"
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

# summarize LABEL MD: the headline rows of bench_vtrain's markdown (the
# overall table's all / held-out / tp = 1 rows and the per-model-size rows
# where there are few), labelled, for the one accuracy table of the sheet.
summarize() {
  python3 - "$1" "$2" <<'PY'
import sys
label, path = sys.argv[1], sys.argv[2]
sec, out = None, []
for line in open(path).read().splitlines():
    if line.startswith("Overall"):
        sec = "overall"
    elif line.startswith("By model size"):
        sec = "size"
    elif line.startswith("By ") or line.startswith("Worst"):
        sec = None
    if not line.startswith("|") or line.startswith("| rows") or line.startswith("|---"):
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if sec == "overall" and cells[0] in ("all", "held-out half", "tp = 1, all"):
        out.append("| %s, %s | %s |" % (label, cells[0], " | ".join(cells[1:])))
    elif sec == "size" and label.startswith("multi"):
        out.append("| %s, %s | %s |" % (label, cells[0], " | ".join(cells[1:])))
print("\n".join(out))
PY
}

if want accuracy; then
  csv=${VTRAIN_CSV:-../shared/data/vtrain_ground_truth_single.csv}
  mcsv=${VTRAIN_MULTI_CSV:-../shared/data/vtrain_ground_truth_multi_3.6B_18.4B.csv}
  cmd="$build/bench_vtrain --csv $csv --topology benchmarks/vtrain-a100x8.json"
  mcmd="$build/bench_vtrain --csv $mcsv --topology benchmarks/vtrain-a100x8.json --jobs $(nproc)"
  detail=benchmarks/accuracy-vtrain.md
  echo "== simulator accuracy: $cmd; $mcmd" >&2
  "$build/bench_vtrain" --csv "$csv" --topology benchmarks/vtrain-a100x8.json \
    --markdown "$tmp/acc.md" >"$tmp/acc.out"
  "$build/bench_vtrain" --csv "$mcsv" --topology benchmarks/vtrain-a100x8.json \
    --jobs "$(nproc)" --markdown "$tmp/macc.md" >"$tmp/macc.out"
  { printf '# Simulator accuracy: every table\n\nWritten by `benchmarks/run.sh --only accuracy` (commit %s, %s); the headline rows are in RESULTS.md, "Simulator accuracy".\n\n## Single node (vTrain, 1,440 runs on 2-8 A100s)\n\nCommand: `%s`\n\n' \
      "$(git rev-parse --short HEAD)" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$cmd"
    cat "$tmp/acc.md"
    printf '\n## Multi-node (vTrain, 41 runs of 3.6B on 64 and 18.4B on 256 A100s)\n\nCommand: `%s`\n\n' "$mcmd"
    cat "$tmp/macc.md"
  } >"$detail.tmp" && mv "$detail.tmp" "$detail"
  { header "$cmd; $mcmd"
    printf 'vTrain'"'"'s measured Megatron runs: single = 1,440 runs on 2-8 A100s, multi = 41 runs of 3.6B on 64 and 18.4B on 256 A100s; every table (by parallelism, worst rows, fitted parameters): [%s](%s).\n\n' \
      "$(basename "$detail")" "$(basename "$detail")"
    echo "| rows | n | MAPE % | median APE % | p90 APE % | max APE % | bias % | Spearman | Pearson |"
    echo "|---|---|---|---|---|---|---|---|---|"
    summarize single "$tmp/acc.md"
    summarize multi "$tmp/macc.md"
    printf '\nAPE = |predicted - measured| / measured; bias = mean signed error; held-out = the seeded half not used for calibration (docs/calibration.md).\n'
  } >"$tmp/acc.block"
  splice accuracy "Simulator accuracy" "$tmp/acc.block"
fi

if want scale; then
  cmd="benchmarks/bench_scale.sh $build --full --random 20 --detail benchmarks/scale-plans.md"
  echo "== scale: $cmd" >&2
  { header "$cmd"
    printf 'GPT models on topologies/dgx-a100.json (`--nodes` 128 / 384 / 64 / 8), FlexFlow'"'"'s on p100x16.json; per case one `simulate` process with the default evaluator, bench_hier'"'"'s warm evaluation where the hierarchical one ran, and `simulate --evaluator full` (the oracle).\n\n'
    bash benchmarks/bench_scale.sh "$build" --full --random 20 --detail benchmarks/scale-plans.md
  } >"$tmp/scale.block"
  splice scale "Scale" "$tmp/scale.block"
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
