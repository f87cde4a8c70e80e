# common.sh — the preamble shared by the shell tests of tests/cli (sourced,
# not run: ctest registers only tests/cli/*.sh). Sets -u; src, bin from
# SS_SOURCE_DIR / SS_BINARY (required) and cds to src; tmp, a scratch
# directory removed on exit; fail, the failure count; check DESCRIPTION
# STATUS, which counts STATUS != 0 as a failure and prints ok/FAIL; check_rc
# DESCRIPTION EXPECTED_RC COMMAND..., which runs COMMAND (stdout to $tmp/out,
# stderr to $tmp/err, rc in $rc) and counts an exit other than EXPECTED_RC.
set -u
src=${SS_SOURCE_DIR:?}
bin=${SS_BINARY:?}
cd "$src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, condition (already evaluated: 0 = ok)
  if [ "$2" -ne 0 ]; then echo "FAIL: $1"; fail=$((fail + 1)); else echo "ok: $1"; fi
}
check_rc() { # DESCRIPTION EXPECTED_RC COMMAND...
  local what=$1 want=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $what: exit $rc, expected $want"
    head -5 "$tmp/out" "$tmp/err"
    fail=$((fail + 1))
    return 1
  fi
  return 0
}
