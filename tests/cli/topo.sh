#!/usr/bin/env bash
# simsearch topo end to end: every shipped topology summarises (text and
# --json), --nodes scales a compact file and is refused for an explicit one,
# --discover writes a file that loads back, usage errors exit 2.
set -u
src=${SS_SOURCE_DIR:?}
bin=${SS_BINARY:?}
cd "$src"
fail=0
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
tmp=$(mktemp -d)
check "--discover --out" 0 "$bin" topo --discover --out "$tmp/host.json"
check "discovered file loads" 0 "$bin" topo "$tmp/host.json"
check "--discover to stdout" 0 "$bin" topo --discover
grep -q '"estimated": true' <<<"$out" || { echo "FAIL discover: no estimated links"; fail=$((fail + 1)); }
rm -rf "$tmp"
echo "topo cli: $fail failed"
[ "$fail" -eq 0 ]
