#!/usr/bin/env bash
# Output files (core/outfile.h): every command that writes (plan --out,
# simulate --trace, search --out/--trace, model --export) refuses a path
# that is not a regular file (device node, FIFO, directory, link to one,
# dangling link) before any work, with exit 2 and the path named; follows a
# link to a regular file (the link stays); writes "-" to standard output
# with the report on standard error; checks the directory first; leaves no
# temp file after SIGTERM/SIGINT; removes temp files a killed writer left;
# writes with 0666 & ~umask; reports a trace that failed after the plan was
# written together with the report.
. "$(dirname "$0")/lib/common.sh"
topo=topologies/p100x16.json
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

expect_refused() { # expect_refused WHAT PATTERN COMMAND...
  local what=$1 pat=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 2 ] || bad "$what: exit $rc, expected 2"
  grep -q -- "$pat" "$tmp/err" || { bad "$what: message lacks '$pat'"; cat "$tmp/err"; }
}

# 1. Not regular files: refused, untouched.
mkfifo "$tmp/fifo"
mkdir "$tmp/dir"
ln -s "$tmp/fifo" "$tmp/link-to-fifo"
ln -s "$tmp/missing" "$tmp/dangling"
for p in fifo dir link-to-fifo dangling; do
  expect_refused "plan --out $p" "$tmp/$p" \
    "$bin" plan --model mlp --topology $topo --plan data-parallel --out "$tmp/$p"
done
expect_refused "profile --db fifo" "FIFO" \
  "$bin" profile --model mlp --topology topologies/local-cpu.json --plan data-parallel --db "$tmp/fifo"
expect_refused "profile --db missing dir" "does not exist" \
  "$bin" profile --model mlp --topology topologies/local-cpu.json --plan data-parallel \
  --db "$tmp/no/such/db.json"
[ -p "$tmp/fifo" ] || bad "the FIFO was replaced"
[ -L "$tmp/dangling" ] && [ ! -e "$tmp/missing" ] || bad "the dangling link was written through"
if [ "$(id -u)" -eq 0 ]; then
  mknod "$tmp/null" c 1 3
  expect_refused "plan --out device node" "character device" \
    "$bin" plan --model mlp --topology $topo --plan data-parallel --out "$tmp/null"
  [ -c "$tmp/null" ] || bad "the device node was replaced"
  expect_refused "model --export device node" "character device" "$bin" model mlp --export "$tmp/null"
  expect_refused "simulate --trace device node" "character device" \
    "$bin" simulate --model mlp --topology $topo --plan data-parallel --trace "$tmp/null"
else
  echo "SKIP device-node cases: mknod needs root"
fi

# 2. Checked before the work: a missing directory or an empty path fails at
# once, even with a search that would run for minutes.
start=$(date +%s)
expect_refused "search --out missing dir" "does not exist" \
  "$bin" --topology $topo --model mlp --time-limit 300 --out "$tmp/no/such/p.json"
expect_refused "search --out=" "empty" "$bin" --topology $topo --model mlp --time-limit 300 --out=
expect_refused "search --trace fifo" "FIFO" \
  "$bin" --topology $topo --model mlp --time-limit 300 --out "$tmp/p.json" --trace "$tmp/fifo"
expect_refused "search same file" "same file" \
  "$bin" --topology $topo --model mlp --time-limit 300 --out "$tmp/p.json" --trace "$tmp/p.json"
[ $(($(date +%s) - start)) -lt 60 ] || bad "the output checks came after the search"
[ -e "$tmp/p.json" ] && bad "a refused search wrote its plan"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  expect_refused "read-only dir" "cannot write" \
    "$bin" --topology $topo --model mlp --time-limit 300 --out "$tmp/ro/p.json"
else
  echo "SKIP read-only directory case: root writes anywhere"
fi

# 3. A link to a regular file: the file is replaced, the link kept.
echo old >"$tmp/target.json"
ln -s "$tmp/target.json" "$tmp/link.json"
"$bin" plan --model mlp --topology $topo --plan data-parallel --out "$tmp/link.json" >/dev/null ||
  bad "plan --out link to a regular file"
[ -L "$tmp/link.json" ] || bad "the link was replaced by a file"
grep -q simsearch-plan "$tmp/target.json" || bad "the link's target was not written"

# 4. "-": the plan on standard output, the report on standard error.
"$bin" plan --model mlp --topology $topo --plan data-parallel --out - >"$tmp/std.json" 2>"$tmp/err" ||
  bad "plan --out -"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["format"] == "simsearch-plan"' \
  "$tmp/std.json" || bad "plan --out -: standard output is not the plan"
grep -q "written to -" "$tmp/err" || bad "plan --out -: the report is not on standard error"
expect_refused "--json with --out -" "standard output" \
  "$bin" plan --model mlp --topology $topo --plan data-parallel --out - --json

# 5. Modes: 0666 & ~umask for new files, plans and traces alike.
(umask 027 && "$bin" simulate --model mlp --topology $topo --plan data-parallel \
  --trace "$tmp/t.json" >/dev/null && "$bin" plan --model mlp --topology $topo \
  --plan data-parallel --out "$tmp/m.json" >/dev/null) || bad "writes under umask 027"
[ "$(stat -c %a "$tmp/t.json")" = 640 ] || bad "trace mode $(stat -c %a "$tmp/t.json"), expected 640"
[ "$(stat -c %a "$tmp/m.json")" = 640 ] || bad "plan mode $(stat -c %a "$tmp/m.json"), expected 640"

# 6. Temp files a killed writer left (its process gone) are removed by the
# next write to the same target; another live process's are not.
touch "$tmp/m.json.tmp.999999999.abcdef" "$tmp/m.json.tmp.$$.ghijkl"
"$bin" plan --model mlp --topology $topo --plan data-parallel --out "$tmp/m.json" >/dev/null
[ -e "$tmp/m.json.tmp.999999999.abcdef" ] && bad "a dead writer's temp file was left"
[ -e "$tmp/m.json.tmp.$$.ghijkl" ] || bad "a live writer's temp file was removed"
rm -f "$tmp/m.json.tmp.$$.ghijkl"

# 7. Signals during a long trace write leave no temp file.
big=(simulate --model gpt:layers=48 --topology topologies/dgx-a100.json --nodes 8
     --plan megatron:tp=4,pp=4,dp=4,mb=16)
for sig in TERM INT; do
  rm -rf "$tmp/sig" && mkdir "$tmp/sig"
  "$bin" "${big[@]}" --trace "$tmp/sig/t.json" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 400); do # wait until the temp file exists
    ls "$tmp/sig" | grep -q tmp && break
    sleep 0.05
  done
  if ls "$tmp/sig" | grep -q tmp; then
    kill -$sig $pid
    wait $pid 2>/dev/null
    left=$(ls "$tmp/sig" | grep -c tmp)
    [ "$left" -eq 0 ] || bad "SIG$sig during the trace write left $left temp file(s)"
  else
    wait $pid
    echo "SKIP SIG$sig case: the trace was written before it could be interrupted"
  fi
done

# 8. A trace that fails after the plan was written (the file-size limit
# stops it): the report is printed, the failure named, exit non-zero, the
# plan kept, no temp file left.
rm -rf "$tmp/fs" && mkdir "$tmp/fs"
(trap '' XFSZ; ulimit -f 64; exec "$bin" --topology $topo --model mlp --budget 50 \
  --out "$tmp/fs/p.json" --trace "$tmp/fs/t.json") >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -ne 0 ] || bad "a failed trace exited 0"
grep -q "plan written to $tmp/fs/p.json" "$tmp/out" || bad "no report after the failed trace"
grep -q "trace to" "$tmp/out" && bad "the report claims the failed trace was written"
grep -q "not the trace" "$tmp/err" || bad "the failed trace is not named"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/fs/p.json" ||
  bad "the plan was not kept"
[ -e "$tmp/fs/t.json" ] && bad "a partial trace was left at the target"
[ "$(ls "$tmp/fs" | grep -c tmp)" -eq 0 ] || bad "the failed trace left a temp file"

exit $fail
