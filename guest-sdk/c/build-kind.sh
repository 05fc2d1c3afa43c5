#!/usr/bin/env bash
# Builds a C job kind into a component: `build-kind.sh OUT.wasm KIND.c [MORE.c ...]`.
#
# The recipe: generate the job-kind world's C bindings (`spindle guest bindgen --lang
# c`), compile the kind, the bindings and cJSON with clang into a wasm32-wasi reactor
# module, and make that a component (`spindle guest componentize`, which adapts
# wasi_snapshot_preview1 to the preview-2 interfaces the host links).
#
# Tools from the environment:
#   SPINDLE       the spindle binary with the `guest` commands (default: `spindle`)
#   CLANG         a clang with the wasm32 target and wasm-ld (default: `clang-19`)
#   WASI_SYSROOT  where wasi-libc is (default: /usr, Debian's `wasi-libc` layout)
#   CJSON_DIR     a directory holding cJSON.c and cJSON.h; unset, Debian's source is
#                 fetched once into $SPINDLE_C_TOOLCHAIN/cjson by fetch-cjson.sh
#   SPINDLE_C_TOOLCHAIN  default: <repo>/target/toolchains/c
#   SPINDLE_WIT   the contract (default: the repo's wit/, else the binary's own)
#   CFLAGS        extra compiler flags (default: -O2)
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: build-kind.sh OUT.wasm KIND.c [MORE.c ...]" >&2; exit 2; }
out=$1; shift
sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$sdk/../.." && pwd)
spindle=${SPINDLE:-spindle}
clang=${CLANG:-clang-19}
sysroot=${WASI_SYSROOT:-/usr}

wit_args=()
wit=${SPINDLE_WIT:-$repo/wit}
[[ -f "$wit/job.wit" ]] && wit_args=(--wit "$wit")

cjson=${CJSON_DIR:-}
if [[ -z "$cjson" ]]; then
    cjson=$("$sdk/fetch-cjson.sh" "${SPINDLE_C_TOOLCHAIN:-$repo/target/toolchains/c}/cjson")
fi
[[ -f "$cjson/cJSON.c" && -f "$cjson/cJSON.h" ]] || { echo "build-kind.sh: no cJSON.c/cJSON.h in $cjson" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The spindle tools say what they wrote on stderr; show it only when they fail.
quiet() { "$@" >"$work/tool.log" 2>&1 || { cat "$work/tool.log" >&2; return 1; }; }

quiet "$spindle" guest bindgen --lang c --out "$work/bindings" "${wit_args[@]}"
target=(--target=wasm32-wasi --sysroot="$sysroot")
# The generated bindings and cJSON are not ours to warn about: built apart, quietly.
"$clang" "${target[@]}" -O2 -w -c "$work/bindings/job_kind.c" -o "$work/job_kind.o"
"$clang" "${target[@]}" -O2 -w -c "$cjson/cJSON.c" -o "$work/cJSON.o"
# shellcheck disable=SC2086 # CFLAGS is a list of flags
"$clang" "${target[@]}" -mexec-model=reactor ${CFLAGS:--O2} -I "$sdk" -I "$work/bindings" -I "$cjson" \
    -o "$work/core.wasm" "$@" "$work/job_kind.o" "$work/cJSON.o" "$work/bindings/job_kind_component_type.o"
mkdir -p "$(dirname "$out")"
quiet "$spindle" guest componentize "$work/core.wasm" -o "$out" "${wit_args[@]}"
