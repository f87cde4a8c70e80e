# common.sh — the preamble shared by the shell tests of tests/cli (sourced,
# not run: ctest registers only tests/cli/*.sh). Sets -u; src, bin from
# SS_SOURCE_DIR / SS_BINARY (required) and cds to src; tmp, a scratch
# directory removed on exit; fail, the failure count; check DESCRIPTION
# STATUS, which counts STATUS != 0 as a failure and prints ok/FAIL.
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
