#!/usr/bin/env bash
# simsearch topo end to end: every shipped topology summarises (text and
# --json), --nodes scales a compact file and is refused for an explicit one,
# --discover writes a file that loads back, usage errors exit 2.
. "$(dirname "$0")/lib/common.sh"
check() { # check DESCRIPTION EXPECTED_RC COMMAND...
  local what=$1 want=$2
  shift 2
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $what: exit $rc, expected $want"
    echo "$out" | head -5
    fail=$((fail + 1))
  fi
}
for f in topologies/*.json; do
  check "topo $f" 0 "$bin" topo "$f"
  grep -q "every pair is reachable" <<<"$out" || { echo "FAIL $f: unreachable pairs"; fail=$((fail + 1)); }
  check "topo $f --json" 0 "$bin" topo "$f" --json
  grep -q '"fingerprint"' <<<"$out" || { echo "FAIL $f --json: no fingerprint"; fail=$((fail + 1)); }
done
check "p100x16 summary" 0 "$bin" topo topologies/p100x16.json
grep -q "16 devices on 4 hosts" <<<"$out" || { echo "FAIL p100x16: $out" | head -3; fail=$((fail + 1)); }
grep -q "slowest: .* 12.5 GB/s" <<<"$out" || { echo "FAIL p100x16 slowest pair"; fail=$((fail + 1)); }
check "dgx-a100 --nodes 4" 0 "$bin" topo topologies/dgx-a100.json --nodes 4
grep -q "32 devices on 4 hosts" <<<"$out" || { echo "FAIL --nodes 4: $out" | head -3; fail=$((fail + 1)); }
check "--nodes on explicit" 2 "$bin" topo topologies/dgx1-v100.json --nodes 2
grep -q "compact" <<<"$out" || { echo "FAIL --nodes explicit message: $out"; fail=$((fail + 1)); }
check "--nodes 0" 2 "$bin" topo topologies/dgx-a100.json --nodes 0
check "no file" 2 "$bin" topo
check "unknown option" 2 "$bin" topo topologies/p100x16.json --bogus
check "missing file" 2 "$bin" topo /nonexistent/topology.json
check "--help" 0 "$bin" topo --help
check "--discover --out" 0 "$bin" topo --discover --out "$tmp/host.json"
check "discovered file loads" 0 "$bin" topo "$tmp/host.json"
check "--discover to stdout" 0 "$bin" topo --discover
grep -q '"estimated": true' <<<"$out" || { echo "FAIL discover: no estimated links"; fail=$((fail + 1)); }
# Large machines: topo of 16,384 devices samples the pairs and says so
# (pair by pair it took minutes); a 1,024-device data-parallel simulation
# runs (its collectives occupy more than 4,096 links at once).
check "topo 16384 devices" 0 "$bin" topo topologies/dgx-a100.json --nodes 2048
grep -q "device pairs (a sample: from and to device 0" <<<"$out" ||
  { echo "FAIL topo 16384: the sample is not named"; fail=$((fail + 1)); }
grep -q "fastest: n0.gpu0 -> n0.gpu1  300 GB/s" <<<"$out" ||
  { echo "FAIL topo 16384: the sample misses the node's own devices"; fail=$((fail + 1)); }
check "simulate 1024 devices" 0 "$bin" simulate --model mlp:layers=1,hidden=64,in=64 \
  --topology topologies/dgx-a100.json --nodes 128 --plan data-parallel
grep -q "1024 devices" <<<"$out" || { echo "FAIL simulate 1024 devices"; fail=$((fail + 1)); }
rm -rf "$tmp"
echo "topo cli: $fail failed"
[ "$fail" -eq 0 ]
