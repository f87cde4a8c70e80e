#!/usr/bin/env bash
# simsearch topo end to end: every shipped topology summarises (text and
# --json), --nodes scales a compact file and is refused for an explicit one,
# --discover writes a file that loads back, usage errors exit 2.
. "$(dirname "$0")/lib/common.sh"
for f in topologies/*.json; do
  check_rc "topo $f" 0 "$bin" topo "$f"
  grep -q "every pair is reachable" "$tmp/out" || { echo "FAIL $f: unreachable pairs"; fail=$((fail + 1)); }
  check_rc "topo $f --json" 0 "$bin" topo "$f" --json
  grep -q '"fingerprint"' "$tmp/out" || { echo "FAIL $f --json: no fingerprint"; fail=$((fail + 1)); }
done
check_rc "p100x16 summary" 0 "$bin" topo topologies/p100x16.json
grep -q "16 devices on 4 hosts" "$tmp/out" || { echo "FAIL p100x16: $(cat "$tmp/out")" | head -3; fail=$((fail + 1)); }
grep -q "slowest: .* 12.5 GB/s" "$tmp/out" || { echo "FAIL p100x16 slowest pair"; fail=$((fail + 1)); }
check_rc "dgx-a100 --nodes 4" 0 "$bin" topo topologies/dgx-a100.json --nodes 4
grep -q "32 devices on 4 hosts" "$tmp/out" || { echo "FAIL --nodes 4: $(cat "$tmp/out")" | head -3; fail=$((fail + 1)); }
check_rc "--nodes on explicit" 2 "$bin" topo topologies/dgx1-v100.json --nodes 2
grep -q "compact" "$tmp/err" || { echo "FAIL --nodes explicit message: $(cat "$tmp/err")"; fail=$((fail + 1)); }
check_rc "--nodes 0" 2 "$bin" topo topologies/dgx-a100.json --nodes 0
check_rc "no file" 2 "$bin" topo
check_rc "unknown option" 2 "$bin" topo topologies/p100x16.json --bogus
check_rc "missing file" 2 "$bin" topo /nonexistent/topology.json
check_rc "--help" 0 "$bin" topo --help
check_rc "--discover --out" 0 "$bin" topo --discover --out "$tmp/host.json"
check_rc "discovered file loads" 0 "$bin" topo "$tmp/host.json"
check_rc "--discover to stdout" 0 "$bin" topo --discover
grep -q '"estimated": true' "$tmp/out" || { echo "FAIL discover: no estimated links"; fail=$((fail + 1)); }
# Large machines: topo of 16,384 devices samples the pairs and says so
# (pair by pair it took minutes); a 1,024-device data-parallel simulation
# runs (its collectives occupy more than 4,096 links at once).
check_rc "topo 16384 devices" 0 "$bin" topo topologies/dgx-a100.json --nodes 2048
grep -q "device pairs (a sample: from and to device 0" "$tmp/out" ||
  { echo "FAIL topo 16384: the sample is not named"; fail=$((fail + 1)); }
grep -q "fastest: n0.gpu0 -> n0.gpu1  300 GB/s" "$tmp/out" ||
  { echo "FAIL topo 16384: the sample misses the node's own devices"; fail=$((fail + 1)); }
check_rc "simulate 1024 devices" 0 "$bin" simulate --model mlp:layers=1,hidden=64,in=64 \
  --topology topologies/dgx-a100.json --nodes 128 --plan data-parallel
grep -q "1024 devices" "$tmp/out" || { echo "FAIL simulate 1024 devices"; fail=$((fail + 1)); }
rm -rf "$tmp"
echo "topo cli: $fail failed"
[ "$fail" -eq 0 ]
