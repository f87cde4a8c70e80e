#!/usr/bin/env bash
# run.sh HARNESS BIN WORKDIR [libFuzzer options...] — run one libFuzzer
# harness (topology, model or plan) on a fresh copy of its seed corpus from
# tests/data (the corpus grows under WORKDIR/corpus-HARNESS; crashes land in
# WORKDIR/artifacts-HARNESS). ctest runs it with -runs=N; `make fuzz` with
# -max_total_time. Exit status: libFuzzer's (0: nothing found).
set -u
name=${1:?harness name}
bin=${2:?harness binary}
work=${3:?work directory}
shift 3
src=${SS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
corpus=$work/corpus-$name
art=$work/artifacts-$name
mkdir -p "$corpus" "$art"
case "$name" in
  topology) seeds=("$src"/topologies/*.json "$src"/tests/data/bad/topo_*.json
              $(grep -l simsearch-topology "$src"/tests/data/sim/*.json)) ;;
  model) seeds=("$src"/tests/data/models/*.json "$src"/tests/data/bad/model_*.json) ;;
  plan) seeds=("$src"/tests/data/plans/*.json "$src"/tests/data/bad/plan_*.json) ;;
  *) echo "run.sh: unknown harness '$name'" >&2; exit 2 ;;
esac
for f in "${seeds[@]}"; do
  [ -f "$f" ] || continue
  cp "$f" "$corpus/seed-$(basename "$f")"
done
echo "fuzz $name: $(ls "$corpus" | wc -l) inputs in the corpus, options: $*"
exec "$bin" -dict="$src/tests/fuzz/json.dict" -artifact_prefix="$art/" -print_final_stats=1 "$@" "$corpus"
