#!/usr/bin/env bash
# Builds VAL (reference validator) and POPF (temporal planner) from upstream sources at pinned
# commits into PREFIX/{bin,lib}. Runs in the image's builder stage; needs git, cmake, a C++
# compiler, flex, bison and the COIN-OR LP libraries (POPF's scheduler uses Clp/Cbc).
set -euo pipefail

PREFIX="${1:?usage: build-planners.sh PREFIX}"
VAL_REPO="${VAL_REPO:-https://github.com/KCL-Planning/VAL.git}"
VAL_COMMIT="${VAL_COMMIT:?pin VAL_COMMIT}"
POPF_REPO="${POPF_REPO:-https://github.com/fmrico/popf.git}"
POPF_COMMIT="${POPF_COMMIT:?pin POPF_COMMIT}"
JOBS="${JOBS:-$(nproc)}"

fetch() {  # fetch REPO COMMIT DIR: exactly one commit, verified
    git init -q "$3"
    git -C "$3" remote add origin "$1"
    git -C "$3" fetch -q --depth 1 origin "$2"
    git -C "$3" checkout -q FETCH_HEAD
    test "$(git -C "$3" rev-parse HEAD)" = "$2" || { echo "commit mismatch for $1" >&2; exit 1; }
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$PREFIX/bin" "$PREFIX/lib"

fetch "$VAL_REPO" "$VAL_COMMIT" "$work/val"
cmake -S "$work/val" -B "$work/val/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" >/dev/null
cmake --build "$work/val/build" -j "$JOBS" --target VAL Validate Parser >/dev/null
install -m 0755 "$work/val/build/bin/Validate" "$work/val/build/bin/Parser" "$PREFIX/bin/"
install -m 0644 "$work/val/build/bin/libVAL.so" "$PREFIX/lib/"

fetch "$POPF_REPO" "$POPF_COMMIT" "$work/popf"
cmake -S "$work/popf" -B "$work/popf/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/popf/build" -j "$JOBS" >/dev/null
# The planner target is named popf3-clp upstream; take whichever popf executable was built.
popf_bin="$(find "$work/popf/build" -type f -perm -u+x -name 'popf*' | head -n 1)"
test -n "$popf_bin" || { echo "POPF build produced no popf executable" >&2; exit 1; }
install -m 0755 "$popf_bin" "$PREFIX/bin/popf"

"$PREFIX/bin/popf" 2>&1 | head -n 3 || true
LD_LIBRARY_PATH="$PREFIX/lib" "$PREFIX/bin/Validate" 2>&1 | head -n 3 || true
