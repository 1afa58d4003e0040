#!/usr/bin/env bash
# Builds VAL (`Validate` with `libVAL.so` beside it, RUNPATH $ORIGIN) and POPF (popf-clp) into
# PREFIX/bin.
#   build-planners.sh PREFIX [SRC]
# SRC (default: ../shared/planners/src beside this checkout, or $PLANNERS_SRC) holds the source
# archives and popf-modern-gcc.patch; without them the pinned commits are fetched with git (the
# image builder) and POPF gets the same four GCC 11/12 fixes by the edits in modernise_popf.
# Needs cmake, g++ (g++-11 for POPF when present), flex, bison, patchelf, the COIN-OR dev packages.
set -euo pipefail

PREFIX="${1:?usage: build-planners.sh PREFIX [SRC]}"
here="$(cd "$(dirname "$0")" && pwd)"
SRC="${2:-${PLANNERS_SRC:-$here/../../../shared/planners/src}}"
VAL_REPO="${VAL_REPO:-https://github.com/KCL-Planning/VAL.git}"
VAL_COMMIT="${VAL_COMMIT:-3c7a1f330bdab0ba28a4762bb45c3f06c27fb6d4}"
POPF_REPO="${POPF_REPO:-https://github.com/fmrico/popf.git}"
POPF_COMMIT="${POPF_COMMIT:-a828f92c589c391ed01ac1a333d67b865f327d65}"
JOBS="${JOBS:-$(nproc)}"
POPF_CXX="${POPF_CXX:-$(command -v g++-11 || command -v g++)}"
POPF_CC="${POPF_CC:-$(command -v gcc-11 || command -v gcc)}"

fetch() {  # fetch REPO COMMIT DIR: exactly one commit, verified
    git init -q "$3"
    git -C "$3" remote add origin "$1"
    git -C "$3" fetch -q --depth 1 origin "$2"
    git -C "$3" checkout -q FETCH_HEAD
    test "$(git -C "$3" rev-parse HEAD)" = "$2" || { echo "commit mismatch for $1" >&2; exit 1; }
}

sources() {  # sources NAME ARCHIVE_GLOB REPO COMMIT: unpack or fetch into $work/NAME
    local archive
    archive="$(ls "$SRC"/$2 2>/dev/null | head -n 1 || true)"
    if [ -n "$archive" ]; then
        tar xzf "$archive" -C "$work"
        test -d "$work/$1" || { echo "$archive did not unpack into $1/" >&2; exit 1; }
    else
        fetch "$3" "$4" "$work/$1"
    fi
}

modernise_popf() {  # the GCC 11/12 fixes: comparators callable as const, iterator traits
    local d="$1/src"
    sed -i 's/\(bool operator()(const VAL::const_symbol\* const a, const VAL::const_symbol\* const b)\) {/\1 const {/' \
        "$d/VALfiles/instantiation.cpp"
    sed -i 's/\(bool operator() (const index & a, const index & b)\) {/\1 const {/' "$d/VALfiles/instantiation.h"
    sed -i -e 's/\(bool operator()(const RPGBuilder::ArtificialVariable \* const a, const RPGBuilder::ArtificialVariable \* const b)\) {/\1 const {/' \
        -e 's/\(bool operator()(const RPGBuilder::RPGNumericPrecondition \* const a, const RPGBuilder::RPGNumericPrecondition \* const b)\) {/\1 const {/' \
        "$d/popf/RPGBuilderNumerics.cpp"
    sed -i '/^struct getConditionally {$/a\
\ttypedef std::input_iterator_tag iterator_category;\
\ttypedef Property * value_type;\
\ttypedef std::ptrdiff_t difference_type;\
\ttypedef Property ** pointer;\
\ttypedef Property * reference;' "$d/VALfiles/TimSupport.cpp"
    test "$(grep -c ') const {' "$d/popf/RPGBuilderNumerics.cpp")" -ge 2 || { echo "POPF fixes did not apply" >&2; exit 1; }
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$PREFIX/bin"

sources VAL 'VAL-*.tar.gz' "$VAL_REPO" "$VAL_COMMIT"
cmake -S "$work/VAL" -B "$work/VAL/b" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/VAL/b" -j "$JOBS" --target Validate >/dev/null
patchelf --set-rpath '$ORIGIN' "$work/VAL/b/bin/Validate"
install -m 0755 "$work/VAL/b/bin/Validate" "$PREFIX/bin/"
install -m 0644 "$work/VAL/b/bin/libVAL.so" "$PREFIX/bin/"

sources popf 'popf-*.tar.gz' "$POPF_REPO" "$POPF_COMMIT"
if [ -f "$SRC/popf-modern-gcc.patch" ]; then
    (cd "$work/popf" && patch -s -p1 < "$SRC/popf-modern-gcc.patch")
else
    modernise_popf "$work/popf"
fi
CXX="$POPF_CXX" CC="$POPF_CC" cmake -S "$work/popf" -B "$work/popf/b" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS=-w >/dev/null
cmake --build "$work/popf/b" -j "$JOBS" >/dev/null
install -m 0755 "$work/popf/b/src/popf/popf" "$PREFIX/bin/popf"

# Both start, and their libraries resolve.
! ldd "$PREFIX/bin/Validate" "$PREFIX/bin/popf" | grep -q "not found"
"$PREFIX/bin/Validate" 2>&1 | head -n 1
"$PREFIX/bin/popf" 2>&1 | head -n 1 || true
