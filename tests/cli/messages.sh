#!/usr/bin/env bash
# Messages that say what is wrong: numeric options state their real range
# (--batch 10^12: "from 1 to 2^32"), a directory given as an input file says
# "is a directory", the reason after a 4,000-character path survives, and a
# throughput below 1 sample/s does not print as 0.
. "$(dirname "$0")/lib/common.sh"
# expect DESCRIPTION RC TEXT COMMAND...: exit RC and output containing TEXT
expect() {
  local what=$1 want=$2 text=$3
  shift 3
  out=$("$@" 2>&1 </dev/null)
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $what: exit $rc, expected $want"; echo "$out" | head -3; fail=$((fail + 1)); return
  fi
  if ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL $what: output lacks '$text'"; echo "$out" | head -3; fail=$((fail + 1))
  fi
}
sim=("$bin" simulate --model mlp --topology topologies/p100x16.json --plan data-parallel)

# numeric options: the range is stated, for bad numbers and for non-numbers
expect "model --batch 10^12" 2 "--batch: 1000000000000 is out of range (expected an integer from 1 to 2^32 = 4294967296)" \
  "$bin" model mlp --batch 1000000000000
expect "model --batch huge" 2 "from 1 to 2^32" "$bin" model mlp --batch 99999999999999999999999
expect "model --batch=" 2 "--batch: '' is not an integer (expected 1 to 2^32 = 4294967296)" "$bin" model mlp --batch=
expect "model --batch missing" 2 "--batch needs a value (an integer from 1 to 2^32" "$bin" model mlp --batch
expect "model --devices 0" 2 "--devices: 0 is out of range (expected an integer from 1 to 65536)" "$bin" model mlp --devices 0
expect "model --devices x" 2 "--devices: 'x' is not an integer" "$bin" model mlp --devices x
expect "simulate --batch 2^32+1" 2 "--batch: 4294967297 is out of range (expected an integer from 1 to 2^32" \
  "${sim[@]}" --batch 4294967297
expect "model --batch 2^32 accepted" 0 "4294967296 (global)" "$bin" model mlp --batch 4294967296
expect "simulate --nodes 0" 2 "--nodes: 0 is out of range (expected an integer from 1 to 65536)" "${sim[@]}" --nodes 0
expect "plan --nodes 10^6" 2 "--nodes: 1000000 is out of range (expected an integer from 1 to 65536)" \
  "$bin" plan --model mlp --topology topologies/p100x16.json --plan data-parallel --nodes 1000000
expect "cost --batch -1" 2 "--batch: -1 is out of range" \
  "$bin" cost --model mlp --topology topologies/p100x16.json --batch -1
expect "topo --nodes 70000" 2 "--nodes: 70000 is out of range (expected an integer from 1 to 65536)" \
  "$bin" topo topologies/dgx-a100.json --nodes 70000

# a directory as an input file
mkdir -p "$tmp/dir.json"
expect "topo DIR" 2 "$tmp/dir.json: is a directory" "$bin" topo "$tmp/dir.json"
expect "model DIR" 2 "$tmp/dir.json: is a directory" "$bin" model "$tmp/dir.json"
expect "plan DIR" 2 "$tmp/dir.json: is a directory" \
  "$bin" plan --model mlp --topology topologies/p100x16.json --plan "$tmp/dir.json"
grep -q "invalid JSON" <<<"$out" && { echo "FAIL plan DIR: says invalid JSON"; fail=$((fail + 1)); }

# a 4,000-character path: the reason and the file name survive
long=$tmp
while [ ${#long} -lt 3900 ]; do long="$long/$(printf 'd%.0s' {1..200})"; done
if mkdir -p "$long" 2>/dev/null; then
  cp tests/data/bad/topo_tiny_peak.json "$long/tiny-peak.json"
  [ ${#long} -ge 3900 ] || { echo "FAIL: path only ${#long} characters"; fail=$((fail + 1)); }
  expect "long path" 2 "tiny-peak.json: \$.device_types[0].peak_tflops.f32: value 1e-300 out of range (expected 0 or 0.0001 to 100000)" \
    "$bin" topo "$long/tiny-peak.json"
  expect "long path, head kept" 2 "simsearch: $tmp/ddd" "$bin" topo "$long/tiny-peak.json"
else
  echo "SKIP long path: cannot create a ${#long}-character path here"
fi

# throughput below 1 sample/s
cat >"$tmp/slow.json" <<'EOF'
{"format": "simsearch-topology", "version": 1, "name": "slow",
 "device_types": [{"name": "t", "peak_tflops": {"f32": 1e-4}, "mem_gbps": 1e-3, "mem_gib": 1e6,
   "launch_us": 1e6, "eff_flops": [[1, 1e-4]], "eff_mem": [[1, 1e-4]]}],
 "hosts": [{"name": "h0"}],
 "devices": [{"name": "g0", "type": "t", "host": "h0"}, {"name": "g1", "type": "t", "host": "h0"}],
 "links": [{"a": "g0", "b": "g1", "gbps": 1e-6, "latency_us": 1e7, "kind": "x"}]}
EOF
expect "slowest machine simulates" 0 "throughput" "$bin" simulate --model mlp --topology "$tmp/slow.json" --plan data-parallel
tp=$(sed -n 's/.*throughput \([^ ]*\) samples\/s.*/\1/p' <<<"$out")
case "$tp" in
  0.000*[1-9]*) ;;
  *) echo "FAIL slow throughput printed as '$tp' (expected 0.000...)"; fail=$((fail + 1)) ;;
esac

echo "messages: $fail failed"
[ "$fail" -eq 0 ]
