#!/usr/bin/env bash
# End-to-end checks of `simsearch probe` and `topo --discover --probe`:
# usage errors exit 2, the nccl backend is refused (exit 1), and with Open
# MPI the probe prints its table and JSON and discovery writes measured
# (not estimated) core links. Without the MPI helper or mpirun it prints a
# SKIP line and exits 77 (ctest: skipped).
. "${SS_SOURCE_DIR:?}/tests/cli/lib/common.sh"
"$bin" probe --help >"$tmp/h" 2>&1; check "probe --help exits 0" $?
"$bin" probe --np 1 >/dev/null 2>&1; [ $? -eq 2 ]; check "probe --np 1 exits 2" $?
"$bin" probe --backend tcp >/dev/null 2>&1; [ $? -eq 2 ]; check "probe --backend tcp exits 2" $?
"$bin" probe --backend nccl >/dev/null 2>"$tmp/e"; [ $? -eq 1 ]; check "probe --backend nccl exits 1" $?
grep -q "NCCL" "$tmp/e"; check "... saying it needs NCCL" $?
"$bin" topo topologies/local-cpu.json --probe >/dev/null 2>&1; [ $? -eq 2 ]; check "--probe without --discover exits 2" $?
if [ ! -x "$(dirname "$bin")/simsearch-probe" ] || ! command -v mpirun >/dev/null; then
  echo "SKIP: no simsearch-probe helper or no mpirun (Open MPI not installed); $fail failure(s)"
  [ $fail -eq 0 ] && exit 77
  exit 1
fi
"$bin" probe --reps 3 --max-bytes 65536 >"$tmp/o" 2>&1; check "probe exits 0" $?
grep -q "^latency .* us, p2p bandwidth .* GB/s" "$tmp/o"; check "probe prints the summary" $?
"$bin" probe --reps 3 --max-bytes 65536 --json >"$tmp/j" 2>&1; check "probe --json exits 0" $?
python3 - "$tmp/j" <<'PY'; check "probe --json: p2p and allreduce points up to 64 KiB" $?
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["format"] == "simsearch-probe" and r["ranks"] == 2
ok = ok and [p["bytes"] for p in r["p2p"]] == [8, 32, 128, 512, 2048, 8192, 32768]
ok = ok and all(p["gbps"] > 0 for p in r["p2p"]) and len(r["allreduce"]) == 7
sys.exit(0 if ok else 1)
PY
"$bin" topo --discover --probe --out "$tmp/t.json" >/dev/null 2>"$tmp/e"; check "topo --discover --probe exits 0" $?
python3 - "$tmp/t.json" <<'PY'; check "discovered shm links are measured, not estimated" $?
import json, sys
t = json.load(open(sys.argv[1]))
shm = [l for l in t["links"] if l.get("kind") == "shm"]
sys.exit(0 if shm and all(not l.get("estimated", False) and l["gbps"] > 0 for l in shm) else 1)
PY
echo "$fail failure(s)"
[ $fail -eq 0 ]
