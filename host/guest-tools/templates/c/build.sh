#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
# Needs Debian's clang-19, lld-19, wasi-libc and libclang-rt-19-dev-wasm32
# (`apt-get install -y clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32`) and
# `spindle` ($SPINDLE, else on PATH) for the bindings and the component; cJSON comes from
# Debian's source package, fetched once into .toolchain/ (or $SPINDLE_C_TOOLCHAIN).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
SPINDLE_WIT="$here/wit" SPINDLE_C_TOOLCHAIN="${SPINDLE_C_TOOLCHAIN:-$here/.toolchain}" \
    "$here/spindle/build-kind.sh" "$out" "$here/{{module}}.c"
echo "built $out"
