#!/usr/bin/env bash
# Gradient-sync tuning (issue 31; search/tune_sync.c, docs/search.md
# "Tuning the gradient sync of one plan"). Usage:
#   benchmarks/bench_sync.sh BUILD_DIR
# For ResNet-101, BERT-large and GPT 1.7B (24 x 2304), data parallel over
# every device of p100x16 (16), k80x64 (64) and dgx-a100 x4 (32 A100), at
# per-device batches such runs use (ResNet-101 32 images, BERT-large 8
# sequences of 512, GPT 1.7B 4 of 1024): `simsearch tune-sync --json`, and a table of the tuned settings
# (threshold, priority, K, synced flags), the speedup of the tuned
# iteration over PyTorch DDP's 25 MB buckets, Horovod's 64 MB fusion buffer
# and no bucketing (each with priority off, no reordering and a barrier
# before the next forward), and the tuning's CPU seconds (user + sys of
# the whole command, which must stay within 10 s each).
set -eu
build=${1:?usage: bench_sync.sh BUILD_DIR}
bin=$build/simsearch
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| model | topology | tuned: bucket, priority, K, flags | tuned ms | vs DDP 25 MB | vs Horovod 64 MB | vs none | simulations | CPU s |"
echo "|---|---|---|---|---|---|---|---|---|"
for mb in resnet101/32 bert/8 gpt:layers=24,hidden=2304,heads=24/4; do
  model=${mb%/*}
  for topo in p100x16:0:16 k80x64:0:64 dgx-a100:4:32; do
    IFS=: read -r tname nodes ndev <<<"$topo"
    extra=(--batch $((${mb#*/} * ndev)))
    [ "$nodes" != 0 ] && extra+=(--nodes "$nodes")
    /usr/bin/time -f "%U %S" -o "$tmp/time" "$bin" tune-sync --model "$model" \
      --topology "topologies/$tname.json" "${extra[@]}" --plan data-parallel --json >"$tmp/out.json"
    python3 - "$model" "$topo" "$tmp/out.json" "$tmp/time" <<'PY'
import json, sys
model, topo, out, tfile = sys.argv[1:5]
r = json.load(open(out))
u, s = map(float, open(tfile).read().split()[-2:])
b = r["best"]
t = b["iteration_time_ms"]
d = r["defaults"]
sp = lambda k: "x%.3f" % (d[k]["iteration_time_ms"] / t)
name = "GPT 1.7B" if model.startswith("gpt") else {"resnet101": "ResNet-101", "bert": "BERT-large"}[model]
print("| %s | %s | %.1f MB, %s, K %d, flags %s | %.3f | %s | %s | %s | %d | %.2f |" % (
    name, topo.split(":")[0] + (" x" + topo.split(":")[1] if topo.split(":")[1] != "0" else ""), b["bucket_bytes"] / 1e6, "on" if b["priority"] else "off",
    b["reorder_k"], "on" if b["synced_flags"] else "off", t, sp("ddp_25mb"), sp("horovod_64mb"),
    sp("none"), r["evaluations"], u + s))
PY
  done
done
