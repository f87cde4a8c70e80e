#!/usr/bin/env bash
# simsearch simulate end to end: --json on data-parallel and megatron plans
# has every required field with sane values, the golden two-device chain
# gives its hand-derived 0.8412 ms, --trace writes valid Chrome Trace JSON,
# a plan that does not fit says so and exits 0, bad plans and usage exit 2.
. "$(dirname "$0")/lib/common.sh"
# validate_json FILE DEVICES: every required field, arrays per device
validate_json() {
  python3 - "$1" "$2" <<'PY' || return 1
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
need = ["model", "topology", "devices", "batch", "iteration_time_ms",
        "throughput_samples_per_s", "peak_memory_bytes", "memory_capacity_bytes",
        "fits", "breakdown", "critical_path", "tasks", "plan"]
missing = [k for k in need if k not in d]
assert not missing, "missing %s" % missing
assert d["devices"] == n, d["devices"]
assert d["iteration_time_ms"] > 0
assert abs(d["throughput_samples_per_s"] - d["batch"] / (d["iteration_time_ms"] / 1e3)) < 1e-6 * d["throughput_samples_per_s"]
assert len(d["peak_memory_bytes"]) == n and len(d["memory_capacity_bytes"]) == n
assert all(p > 0 for p in d["peak_memory_bytes"])
assert isinstance(d["fits"], bool)
b = d["breakdown"]
for k in ["compute_ms", "communication_ms", "idle_ms"]:
    assert k in b, k
    assert len(b["per_device"][k]) == n
    assert all(0 <= v <= d["iteration_time_ms"] * (1 + 1e-9) for v in b["per_device"][k])
assert d["tasks"] > 0
assert len(d["critical_path"]) >= 1
for e in d["critical_path"]:
    assert set(["name", "kind", "time_ms", "share"]) <= set(e)
PY
}

check_rc "simulate --help" 0 "$bin" simulate --help
grep -q "usage: simsearch simulate" "$tmp/out" || { echo "FAIL --help text"; fail=$((fail + 1)); }

check_rc "data-parallel --json" 0 "$bin" simulate --model mlp --topology topologies/p100x16.json \
  --plan data-parallel --json
cp "$tmp/out" "$tmp/dp.json"
validate_json "$tmp/dp.json" 16 || { echo "FAIL data-parallel json"; fail=$((fail + 1)); }

check_rc "megatron --json" 0 "$bin" simulate \
  --model gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1024 --topology topologies/p100x16.json \
  --batch 32 --plan megatron:tp=2,pp=2,dp=4,mb=4 --json
cp "$tmp/out" "$tmp/mt.json"
validate_json "$tmp/mt.json" 16 || { echo "FAIL megatron json"; fail=$((fail + 1)); }

# golden: chain2 (two 1000x1000 linears, batch 64) data parallel on "pair"
# (unit-gpu: 1 TFLOP/s, launch 0; one 10 GB/s, 5 us link)
check_rc "golden chain2 on pair" 0 "$bin" simulate --model tests/data/sim/chain2.json \
  --topology tests/data/sim/pair.json --plan data-parallel --json
python3 -c 'import json,sys; d=json.load(sys.stdin); t=d["iteration_time_ms"]
# data parallel over 2: 32 samples each: fwd 64+64, bwd 128+128 us; each
# weight all-reduced over n = 2 (ring: 6 + 2*5 + 4e6/1e4 = 416 us), fc2s from
# 256 us [256, 672], fc1s [672, 1088], update fc1 12 us -> 1.1 ms
assert abs(t - 1.1) < 1e-9, t' <"$tmp/out" || { echo "FAIL golden data-parallel chain2: $(cat "$tmp/out")" | head -3; fail=$((fail + 1)); }

check_rc "human report" 0 "$bin" simulate --model mlp --topology topologies/p100x16.json --plan data-parallel
for w in "iteration" "throughput" "peak memory" "fits" "critical path"; do
  grep -q "$w" "$tmp/out" || { echo "FAIL human report lacks '$w'"; fail=$((fail + 1)); }
done

check_rc "trace" 0 "$bin" simulate --model mlp --topology topologies/p100x16.json --plan data-parallel \
  --trace "$tmp/trace.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"]
assert any(e.get("ph") == "X" for e in ev), "no complete events"' "$tmp/trace.json" \
  || { echo "FAIL trace is not valid Chrome Trace JSON"; fail=$((fail + 1)); }

# a plan that does not fit: 64 GPT-medium samples of 1024 tokens on one P100
check_rc "does not fit" 0 "$bin" simulate --model gpt --topology topologies/p100x16.json --batch 64 \
  --plan megatron:tp=1,pp=1,dp=16
grep -q "DOES NOT FIT" "$tmp/out" || { echo "FAIL no DOES NOT FIT line: $(cat "$tmp/out")" | head -3; fail=$((fail + 1)); }

check_rc "bad plan file" 2 "$bin" simulate --model mlp --topology topologies/p100x16.json \
  --plan "$tmp/nonexistent-plan.json"
grep -q "nonexistent-plan.json" "$tmp/err" || { echo "FAIL bad plan message: $(cat "$tmp/err")"; fail=$((fail + 1)); }
check_rc "bad megatron spec" 2 "$bin" simulate --model mlp --topology topologies/p100x16.json \
  --plan megatron:tp=3,pp=1,dp=1
check_rc "missing --plan" 2 "$bin" simulate --model mlp --topology topologies/p100x16.json
check_rc "unknown option" 2 "$bin" simulate --model mlp --topology topologies/p100x16.json \
  --plan data-parallel --bogus
check_rc "bad topology" 2 "$bin" simulate --model mlp --topology "$tmp/none.json" --plan data-parallel

echo "simulate: $fail failure(s)"
[ "$fail" -eq 0 ]
