#!/usr/bin/env bash
# Builds the greet kind into a component: ./build.sh OUT.wasm
#
# `tsc` (strict, tsconfig.json) compiles the kind to JavaScript in build/, which is then
# built as a JavaScript kind.
# SPINDLE_JS_TOOLCHAIN: the npm prefix holding componentize-js, jco, typescript and
#   @types/node (default: the repo's target/toolchains/js; its node_modules is used)
# SPINDLE_WIT: the WIT folder (default: the repo's wit)
# SPINDLE_SDK: the JS SDK (default: the repo's guest-sdk/js)
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUT.wasm [componentize options]" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$(realpath -m "$1")"; shift
toolchain="${SPINDLE_JS_TOOLCHAIN:-$repo/target/toolchains/js}"
sdk="$(cd "${SPINDLE_SDK:-$repo/guest-sdk/js}" && pwd)"
mkdir -p "$here/node_modules/@spindle"
ln -sfn "$sdk" "$here/node_modules/@spindle/guest"
cd "$here"
rm -rf build
node "$toolchain/node_modules/typescript/bin/tsc" -p . --typeRoots "$toolchain/node_modules/@types"
exec node "$sdk/tools/componentize.mjs" "$here/build/greet.js" "$out" \
  --toolchain "$toolchain" --wit "${SPINDLE_WIT:-$repo/wit}" "$@"
