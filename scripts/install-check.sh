#!/usr/bin/env bash
# Checks that `make install` stands alone: installs into a temporary prefix, builds a small C
# program against the installed lathe.pc (shared, and static through Libs.private), and checks
# that nothing installed or built refers back to this tree (RUNPATH, -L, the libraries ldd
# resolves), then runs the program with the build's shared library and its MLX links out of
# reach (renamed: no test uses them). BUILD is the build folder (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
build=${BUILD:-build}
tmp=$(mktemp -d)
away=("$build/liblathe.so" "$build/lathe")
restore() {
  for f in "${away[@]}"; do [ ! -e "$here/$f.away" ] || mv "$here/$f.away" "$here/$f"; done
}
trap 'restore; rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
make -s -j"$(nproc 2>/dev/null || echo 2)" CI=1 BUILD="$build" PREFIX="$prefix" install >/dev/null
cat >"$tmp/hello.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "lathe.h"
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    lathe_backend_t b;
    lathe_status_t st = lathe_backend_new(argv[i], &b);
    if (st) { printf("%s: %s\n", argv[i], lathe_status_message(st)); return 1; }
    printf("%s: %s\n", argv[i], lathe_backend_description(b));
    lathe_backend_free(b);
  }
  return 0;
}
C
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -o "$tmp/hello" "$tmp/hello.c" $(pkg-config --cflags --libs lathe) -Wl,-rpath,"$prefix/lib"
# shellcheck disable=SC2046
cc -o "$tmp/hello_static" "$tmp/hello.c" $(pkg-config --cflags lathe) "$prefix/lib/liblathe.a" \
  $(pkg-config --static --libs-only-other --libs-only-l lathe | sed 's/-llathe//') \
  $(pkg-config --static --libs-only-L lathe)
bad=0
for f in "$prefix"/lib/liblathe.so "$tmp/hello" "$tmp/hello_static"; do
  if readelf -d "$f" | grep -E 'RUNPATH|RPATH' | grep -F "$here"; then
    echo "install-check: $f has a RUNPATH into $here" >&2
    bad=1
  fi
done
if grep -F "$here" "$prefix/lib/pkgconfig/lathe.pc"; then
  echo "install-check: lathe.pc names $here" >&2
  bad=1
fi
if ldd "$tmp/hello" | grep -F "$here"; then
  echo "install-check: the program loads libraries from $here" >&2
  bad=1
fi
configs=(lathe:cpu)
if [ -d "$prefix/lib/lathe/mlx" ]; then configs+=(mlx:cpu); fi
for f in "${away[@]}"; do [ ! -e "$here/$f" ] || mv "$here/$f" "$here/$f.away"; done
"$tmp/hello" "${configs[@]}"
"$tmp/hello_static" "${configs[@]}" >/dev/null
restore
[ "$bad" = 0 ] || exit 1
echo "install-check: make install into a temporary prefix stands alone (${configs[*]})"
