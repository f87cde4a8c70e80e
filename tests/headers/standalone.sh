#!/usr/bin/env bash
# standalone.sh — every public topic header (include/simsearch/*.h) compiles
# on its own, first in a translation unit, with -std=c11 -Wall -Wextra
# -Werror -pedantic: it includes what it needs and nothing relies on an
# earlier header having been included. Each is also included twice (the
# guard), and the umbrella include/simsearch.h is checked the same way.
# Needs SS_SOURCE_DIR; CC (default cc).
set -u
src=${SS_SOURCE_DIR:?}
cc=${CC:-cc}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0
for h in "$src"/include/simsearch/*.h "$src"/include/simsearch.h; do
  rel=${h#"$src"/include/}
  printf '#include "%s"\n#include "%s"\nint ss_header_probe(void);\nint ss_header_probe(void) { return 0; }\n' \
    "$rel" "$rel" >"$tmp/t.c"
  if "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -I"$src/include" -c "$tmp/t.c" -o "$tmp/t.o" \
       2>"$tmp/err"; then
    n=$((n + 1))
  else
    echo "FAIL: $rel does not compile alone:"
    head -5 "$tmp/err"
    fail=1
  fi
done
[ "$n" -ge 10 ] || { echo "FAIL: only $n headers compiled (expected the umbrella and >= 9 topic headers)"; fail=1; }
[ "$fail" = 0 ] && echo "ok: $n headers compile alone"
exit "$fail"
