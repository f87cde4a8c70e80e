#!/usr/bin/env bash
# `simsearch models` and `simsearch model`: the zoo listing (table and JSON),
# one-model summaries, export + reload with the same fingerprint, batch
# handling, and exit codes for bad usage and bad input.
set -u
bin=${SS_BINARY:?}
src=${SS_SOURCE_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then :; else echo "FAIL: $what"; fail=$((fail + 1)); fi
}
field() { # field NAME FILE -> value of "NAME": in a JSON summary
  sed -n "s/^ *\"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$2" | head -n 1
}

"$bin" models >"$tmp/models.txt"; rc=$?
check "models exits 0" [ $rc -eq 0 ]
for m in alexnet inception_v3 resnet101 rnntc rnnlm nmt bert albert gpt mlp llama mixtral deepseek; do
  check "models lists $m" grep -q "^$m " "$tmp/models.txt"
done

"$bin" models --json >"$tmp/models.json"; rc=$?
check "models --json exits 0" [ $rc -eq 0 ]
check "models --json has 13 entries" [ "$(grep -c '"forward_flops_per_sample"' "$tmp/models.json")" -eq 13 ]
check "models --json has parameters" grep -q '"parameters": 44549160,' "$tmp/models.json"
check "models --json resnet101 batch" grep -q '"batch": 64,' "$tmp/models.json"
check "models --json alexnet batch 256" grep -q '"batch": 256,' "$tmp/models.json"
if command -v python3 >/dev/null; then
  check "models --json is valid JSON" python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert len(a)==13 and all("name" in e and "parameters" in e for e in a)' "$tmp/models.json"
fi

spec='gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100'
"$bin" model "$spec" --batch 4 --json >"$tmp/gpt.json"; rc=$?
check "model --json exits 0" [ $rc -eq 0 ]
check "model --json batch" [ "$(field batch "$tmp/gpt.json")" = 4 ]
check "model --json precision" [ "$(field precision "$tmp/gpt.json")" = mixed ]
check "model --json optimizer" [ "$(field optimizer "$tmp/gpt.json")" = adam ]
# 2 layers x (12*64^2 + 13*64) + (128 + 16)*64 + final LayerNorm 2*64: the
# vocabulary of 100 padded to 128 as Megatron pads it (vocab_pad=128, tp=1)
check "model --json parameters" [ "$(field parameters "$tmp/gpt.json")" = $((2 * (12 * 64 * 64 + 13 * 64) + 144 * 64 + 128)) ]
"$bin" model "$spec,vocab_pad=0" --batch 4 --json >"$tmp/gpt-nopad.json"
check "vocab_pad=0 keeps the vocabulary" [ "$(field parameters "$tmp/gpt-nopad.json")" = $((2 * (12 * 64 * 64 + 13 * 64) + 116 * 64 + 128)) ]
"$bin" model "$spec,tp=4" --batch 4 --json >"$tmp/gpt-tp4.json"
check "tp=4 pads to a multiple of 512" [ "$(field parameters "$tmp/gpt-tp4.json")" = $((2 * (12 * 64 * 64 + 13 * 64) + 528 * 64 + 128)) ]

# a megatron: plan's tp reaches the model before the plan is built: the plan
# file names the fingerprint of the model padded for tp = 4
"$bin" plan --model "$spec" --topology "$src/topologies/dgx-a100.json" --plan megatron:tp=4,pp=1,dp=2 \
  --batch 4 --out "$tmp/plan-tp4.json" >/dev/null; rc=$?
check "plan with megatron:tp=4 exits 0" [ $rc -eq 0 ]
check "megatron:tp=4 builds the model padded for tp=4" grep -q "\"$(field fingerprint "$tmp/gpt-tp4.json")\"" "$tmp/plan-tp4.json"
"$bin" plan --model "$spec,tp=2" --topology "$src/topologies/dgx-a100.json" --plan megatron:tp=4,pp=1,dp=2 \
  --batch 4 >"$tmp/plan-bad.txt" 2>&1; rc=$?
check "model tp=2 with a tp=4 plan is refused" [ $rc -ne 0 ]
check "the refusal names both" grep -q "tp=2, but the plan is tensor-parallel 4" "$tmp/plan-bad.txt"

"$bin" model "$spec" --batch 4 --export "$tmp/gpt-export.json" >"$tmp/human.txt"; rc=$?
check "model --export exits 0" [ $rc -eq 0 ]
check "model human output" grep -q '^parameters' "$tmp/human.txt"
check "export written" [ -s "$tmp/gpt-export.json" ]
"$bin" model "$tmp/gpt-export.json" --json >"$tmp/reload.json"; rc=$?
check "reload exits 0" [ $rc -eq 0 ]
check "reload has the same fingerprint" [ "$(field fingerprint "$tmp/gpt.json")" = "$(field fingerprint "$tmp/reload.json")" ]
"$bin" model "$tmp/gpt-export.json" --batch 8 --json >"$tmp/rebatch.json"; rc=$?
check "rebatched file exits 0" [ $rc -eq 0 ]
"$bin" model "$spec" --batch 8 --json >"$tmp/gpt8.json"
check "rebatched file equals the zoo model at that batch" [ "$(field fingerprint "$tmp/rebatch.json")" = "$(field fingerprint "$tmp/gpt8.json")" ]

"$bin" model mlp --devices 4 --json >"$tmp/mlp.json"
check "default batch is 64 per device" [ "$(field batch "$tmp/mlp.json")" = 256 ]

expect_exit() { # expect_exit CODE PATTERN ARGS...
  local code=$1 pat=$2; shift 2
  local err
  err=$("$bin" "$@" 2>&1 >/dev/null </dev/null)
  local rc=$?
  check "simsearch $* exits $code (got $rc)" [ $rc -eq "$code" ]
  [ -n "$pat" ] && check "simsearch $*: message has '$pat' (got: $err)" grep -qF -- "$pat" <<<"$err"
}
expect_exit 2 "unknown model 'nosuch'" model nosuch
expect_exit 2 "layers=0 out of range" model gpt:layers=0
expect_exit 2 "not divisible by heads" model gpt:hidden=1000
expect_exit 2 "missing the model" model
expect_exit 2 "--batch" model mlp --batch 0
expect_exit 2 "unknown option" model mlp --bogus
expect_exit 2 "unknown option" models --bogus
expect_exit 2 "/nonexistent-dir/m.json" model mlp --export /nonexistent-dir/m.json
expect_exit 2 "no/such/file.json" model no/such/file.json
# expert parallelism on a small DeepSeek-like model: simulated (hierarchical
# by request, the evaluator that judges the large ep plans), bad ep refused
ds="deepseek:layers=4,dense=1,seq=256,hidden=512,heads=8,ffn=1024,moe_ffn=256"
h800="$src/topologies/dgx-h800.json"
"$bin" simulate --model "$ds" --topology "$h800" --nodes 2 --batch 16 \
  --plan megatron:tp=1,pp=2,dp=8,ep=4,mbs=1 --evaluator hier --json >"$tmp/ep.json"; rc=$?
check "simulate with ep=4 exits 0" [ $rc -eq 0 ]
check "simulate with ep=4: hierarchical" grep -q '"evaluator": "hierarchical"' "$tmp/ep.json"
check "simulate with ep=4: the plan says ep" grep -q 'ep=4' "$tmp/ep.json"
expect_exit 2 "ep=3 must divide dp=8" simulate --model "$ds" --topology "$h800" --nodes 1 \
  --batch 16 --plan megatron:tp=1,pp=1,dp=8,ep=3
expect_exit 2 "has no mixture-of-experts layer" simulate --model gpt:layers=2 --topology "$h800" \
  --nodes 1 --batch 16 --plan megatron:tp=1,pp=1,dp=8,ep=2
# hf:PATH (a folder or its config.json, with :key=value overrides) is read
# as a file: found under a relative path, and never overwritten by --export
hf="$src/tests/data/hf/llama3-8b"
"$bin" model "hf:$hf" >"$tmp/hf.txt" 2>&1
check "model hf:FOLDER exits 0" grep -q '^parameters   8.03 G' "$tmp/hf.txt"
"$bin" model "hf:$hf/config.json:seq=4096" >"$tmp/hf.txt" 2>&1
check "model hf:FILE:seq=4096 exits 0" grep -q '^parameters   8.03 G' "$tmp/hf.txt"
mkdir -p "$tmp/hfdir" && cp "$hf/config.json" "$tmp/hfdir/"
"$bin" model "hf:$tmp/hfdir" --export "$tmp/hfdir/config.json" 2>"$tmp/hf.err"; rc=$?
check "export over hf's config.json refused" [ $rc -eq 2 ]
check "the refusal names the input" grep -q 'would destroy the input' "$tmp/hf.err"
check "hf's config.json untouched" cmp -s "$hf/config.json" "$tmp/hfdir/config.json"

"$bin" model --help >/dev/null; check "model --help exits 0" [ $? -eq 0 ]
"$bin" models --help >/dev/null; check "models --help exits 0" [ $? -eq 0 ]

echo "models cli: $fail failure(s)"
[ $fail -eq 0 ]
