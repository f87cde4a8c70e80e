# pkgconfig.sh — `make install` as a user runs it, into a temporary prefix;
# then a C program (tests/install/example.c) built through
# `pkg-config --cflags --libs simsearch` against the installed shared
# library, and once more against the static one, must predict what the
# installed simsearch predicts. Checks every installed part: the binary,
# libsimsearch.so and .a, the header, simsearch.pc, topologies, man pages
# (man -l renders them when man is present), bash completion.
# Needs SS_SOURCE_DIR, SS_BUILD_DIR (a configured and built tree; it is
# installed as built: rebuilding here would race the tests running beside).
. "$(dirname "$0")/../cli/lib/common.sh"
build=${SS_BUILD_DIR:?}
cc=${CC:-cc}
extra=${SS_EXTRA_CFLAGS:-} # the sanitizer build: its library needs the runtime
prefix="$tmp/prefix with space"
make -s -C "$src" install BUILD="$build" PREFIX="$prefix" INSTALL_ONLY=1 >"$tmp/install.log" 2>&1
check "make install PREFIX=... (log: $(tail -3 "$tmp/install.log" | tr '\n' ' '))" $?
lib=$(ls -d "$prefix"/lib*/ 2>/dev/null | head -1)
lib=${lib%/}
for f in bin/simsearch include/simsearch.h share/simsearch/topologies/p100x16.json \
  share/man/man1/simsearch.1 share/man/man1/simsearch-search.1 share/man/man1/simsearch-simulate.1 \
  share/bash-completion/completions/simsearch; do
  [ -e "$prefix/$f" ]; check "installed $f" $?
done
for h in "$src"/include/simsearch/*.h; do # the topic headers simsearch.h includes
  [ -e "$prefix/include/simsearch/${h##*/}" ]; check "installed include/simsearch/${h##*/}" $?
done
for f in libsimsearch.a libsimsearch.so pkgconfig/simsearch.pc; do
  [ -e "$lib/$f" ]; check "installed ${lib#"$prefix"/}/$f" $?
done
export PKG_CONFIG_PATH="$lib/pkgconfig"
cflags=$(pkg-config --cflags simsearch) && libs=$(pkg-config --libs simsearch)
check "pkg-config --cflags --libs simsearch ($cflags $libs)" $?
# shellcheck disable=SC2086 # the flags are words (the prefix has a space: pkg-config quotes it)
eval "\"\$cc\" -std=c11 -Wall -Wextra -Werror $extra -o \"\$tmp/ex\" \"\$src/tests/install/example.c\" $cflags $libs"
check "example.c builds against the shared library through pkg-config" $?
# static: libsimsearch.a, its dependencies shared (pkg-config --static would
# ask for hwloc's own static dependencies, libudev.a, which distributions
# rarely ship)
static_libs="$(pkg-config --libs jansson hwloc) -lm -ldl"
eval "\"\$cc\" -std=c11 -Wall -Wextra -Werror $extra -o \"\$tmp/ex_static\" \"\$src/tests/install/example.c\" $cflags \"\$lib/libsimsearch.a\" $static_libs"
check "example.c builds against the static library" $?
topo="$prefix/share/simsearch/topologies/p100x16.json"
want=$("$prefix/bin/simsearch" simulate --model mlp --topology "$topo" --plan data-parallel --json |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(repr(d["iteration_time_ms"]), "fits" if d["fits"] else "does-not-fit")')
check "the installed simsearch simulates ($want)" $?
got=$(LD_LIBRARY_PATH="$lib" "$tmp/ex" "$topo" mlp data-parallel)
check "the shared-library program runs ($got)" $?
ldd "$tmp/ex" 2>/dev/null | grep -q "libsimsearch.so" 2>/dev/null
check "it is linked against libsimsearch.so" $?
got_static=$("$tmp/ex_static" "$topo" mlp data-parallel)
check "the static program runs ($got_static)" $?
python3 - "$want" "$got" "$got_static" <<'PY'
import sys
w, *gs = sys.argv[1:]
wt, wf = w.split()
for g in gs:
    t, f = g.split()
    assert f == wf and abs(float(t) - float(wt)) <= 1e-9 * float(wt), (w, g)
PY
check "the programs predict what simsearch simulate predicts" $?
bash -n "$prefix/share/bash-completion/completions/simsearch"
check "the completion script parses" $?
if command -v man >/dev/null; then
  MANWIDTH=80 man -l "$prefix/share/man/man1/simsearch-search.1" 2>/dev/null | grep -q -- "--time-limit"
  check "man -l renders simsearch-search.1" $?
fi
echo "install: $fail failure(s)"
[ $fail -eq 0 ]
