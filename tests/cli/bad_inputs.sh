#!/usr/bin/env bash
# Every malformed or inconsistent file under tests/data/bad must make the CLI
# exit 2 with one clear message that names the file and contains the text of
# its .expect sidecar; never crash (the sanitizer build runs this too).
#   model_*  -> simsearch model FILE
#   topo_*   -> simsearch topo FILE
#   plan_*   -> simsearch plan --model mlp --topology topologies/p100x16.json --plan FILE
#   profile_* -> simsearch cost --model mlp --topology topologies/local-cpu.json --db FILE
#   input_*  -> simsearch topo FILE: not a regular file, refused by the CLI
#               before any loader reads it (input_dir.json is a directory;
#               input_fifo.json, a FIFO git cannot hold, is made here, its
#               .expect sidecar in tests/data/bad: reading one blocks forever)
set -u
src=${SS_SOURCE_DIR:?}
bin=${SS_BINARY:?}
cd "$src"
pass=0
fail=0
count=0
fifos=$(mktemp -d)
trap 'rm -rf "$fifos"' EXIT
mkfifo "$fifos/input_fifo.json"
for f in tests/data/bad/*.json "$fifos"/*.json; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .json)
  expect_file="tests/data/bad/$name.expect"
  case "$name" in
    input_*) cmd=("$bin" topo "$f") ;;
    model_*) cmd=("$bin" model "$f") ;;
    topo_*) cmd=("$bin" topo "$f") ;;
    plan_*) cmd=("$bin" plan --model mlp --topology topologies/p100x16.json --plan "$f") ;;
    profile_*) cmd=("$bin" cost --model mlp --topology topologies/local-cpu.json --db "$f") ;;
    *) echo "FAIL $f: unknown fixture prefix"; fail=$((fail + 1)); continue ;;
  esac
  count=$((count + 1))
  err=$(timeout 60 "${cmd[@]}" 2>&1 >/dev/null </dev/null)
  rc=$?
  ok=1
  why=""
  if [ "$rc" -ne 2 ]; then ok=0; why="exit $rc, expected 2"; fi
  if ! grep -qF -- "$f" <<<"$err"; then ok=0; why="$why; message does not name the file"; fi
  if [ ! -f "$expect_file" ]; then
    ok=0; why="$why; missing $expect_file"
  else
    want=$(head -n 1 "$expect_file")
    if ! grep -qF -- "$want" <<<"$err"; then ok=0; why="$why; message lacks '$want'"; fi
  fi
  lines=$(printf '%s\n' "$err" | grep -c .)
  if [ "$lines" -gt 3 ]; then ok=0; why="$why; $lines lines of output, expected one message"; fi
  if [ $ok -eq 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $f: $why"
    echo "  stderr: $err"
  fi
done
if [ "$count" -lt 25 ]; then
  echo "FAIL: only $count bad-input fixtures (at least 25 required)"
  fail=$((fail + 1))
fi
echo "bad inputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
