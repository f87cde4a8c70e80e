#!/usr/bin/env bash
# Activation memory per transformer layer against the closed form of
# Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
# Transformer Models"), the static bytes per parameter, and Llama 3 405B
# in Meta's layout fitting an H100 (issue 29).
# A layer's bytes on device 0 = peak(layers=3) - peak(layers=2) less the
# static difference: the peak sits where the last forward ends, holding
# every layer's kept activations. tp 8, sp 1 (sequence parallel), one
# micro-batch of one sample; s = seq, h = hidden, a = heads, t = tp.
#
# GPT (hidden 1024, 16 heads, seq 1024, LayerNorm, GeLU 4h, dropout,
# unfused attention): s h / t = 131,072 elements.
#   none      s b h (34 + 5 a s / h) / t = 131,072 x (34 + 80) = 14,942,208 B
#   selective 34 s b h / t                = 131,072 x 34        =  4,456,448 B
# (full recompute, 2 s b h / t per layer in Megatron, keeps nothing within
# a stage here: not modelled, simulator/build_fwd.c.)
# Llama 3 8B shape (hidden 4096, 32 heads, 8 kv heads, ffn 14,336, RMSNorm,
# SwiGLU, flash attention, no dropout), seq 8,192: 2 s h / t = 8,388,608 B.
#   none: ln1 input, qkv input (the local shard), q, flash output, ln2
#     input, gate/up input: 6 x 8,388,608; k and v: 2 x 8192 x 128 x 2 B =
#     4,194,304; the softmax statistics: 8192 x 4 heads x 4 B = 131,072;
#     SwiGLU: gate, up, fc2's input: 3 x 8192 x 1792 x 2 B = 88,080,384:
#     142,737,408 B (Megatron: the fused gate/up input kept once, the flash
#     output once for the kernel and the projection, silu(gate) recomputed)
# Static bytes of a layer per device (mixed precision, Adam): bf16 weight
# and gradient (4 B / param) plus fp32 master, m and v (12 B / param),
# divided over dp by the distributed optimizer. GPT layer: 12 h^2 + 13 h =
# 12,596,224 params / tp 8 = 1,574,528; x 16 = 25,192,448 B plus the
# LayerNorms and row-parallel biases every tp rank holds whole (4 h + h..):
# checked as the formula's bytes within 0.5%. Llama 8B layer with dp 4 and
# distopt: the linears' 218,103,808 params / tp 8 = 27,262,976 x (4 + 12 / 4)
# = 190,840,832 B, plus the two RMSNorm gammas every tp rank holds whole,
# their optimizer state split over all 32 replicas (2 x 4096 x (4 + 12 / 32)
# = 35,840): 190,876,672 B. (Megatron splits it over dp only: 57,344 B, a
# 21.5 KB difference per layer left as it is, build_weights.c.)
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"

layer() { # model-spec plan nodes batch -> "dyn static" of one layer on device 0
  for L in 2 3; do
    "$bin" simulate --model "$1,layers=$L" --batch "$4" --topology topologies/dgx-h100.json \
      --nodes "$3" --plan "$2" --evaluator full --json >"$tmp/l$L.json" 2>"$tmp/e" || return 1
  done
  python3 - "$tmp/l2.json" "$tmp/l3.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ds = b["static_memory_bytes"][0] - a["static_memory_bytes"][0]
print("%.0f %.0f" % (b["peak_memory_bytes"][0] - a["peak_memory_bytes"][0] - ds, ds))
PY
}

expect() { # name got want
  [ "$2" = "$3" ]
  check "$1: $2 B (closed form $3)" $?
}

gpt=gpt:hidden=1024,heads=16,seq=1024
for r in "none 14942208" "selective 4456448"; do
  set -- $r
  out=$(layer $gpt megatron:tp=8,pp=1,dp=1,mbs=1,sp=1,recompute=$1 1 1)
  check "gpt recompute=$1 simulates" $?
  expect "gpt layer, recompute=$1" "${out% *}" "$2"
done
stat=${out#* }
python3 -c "import sys; s=float(sys.argv[1]); w=12*1024*1024+13*1024; f=w/8*16; \
sys.exit(0 if abs(s-f)/f < 0.005 else 1)" "$stat"
check "gpt layer static $stat B within 0.5% of (12h^2+13h)/8 x 16 B" $?

llama=llama:size=8b
for r in "none 142737408"; do
  set -- $r
  out=$(layer $llama megatron:tp=8,pp=1,dp=4,mbs=1,sp=1,distopt=1,recompute=$1 4 4)
  check "llama recompute=$1 simulates" $?
  expect "llama layer, recompute=$1" "${out% *}" "$2"
done
expect "llama layer static (distopt over dp 4)" "${out#* }" 190876672
# Llama 3 405B on 16,384 H100 in Meta's layout (tp 8, pp 16, dp 128, vp 2)
# fits an 80 GiB H100, as Meta ran it: 76.8 GiB on device 0 (13.2 static +
# 8 layers x 16 micro-batches x 0.497 GiB); it was 181.8 GiB.
"$bin" simulate --model llama:size=405b --batch 2048 --topology topologies/dgx-h100.json \
  --nodes 2048 --plan megatron:tp=8,pp=16,dp=128,mbs=1,sp=1,distopt=1,first=8,last=6,vp=2 \
  --json >"$tmp/405.json" 2>"$tmp/e"
check "405B / 16,384 simulates" $?
python3 - "$tmp/405.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p = max(r["peak_memory_bytes"]) / 2**30
print("405B peak %.2f GiB" % p)
sys.exit(0 if r["fits"] and 70 < p < 80 else 1)
PY
check "405B / 16,384 in Meta's layout fits 80 GiB" $?

echo "memory layer CLI: $fail failed"
[ "$fail" -eq 0 ]
