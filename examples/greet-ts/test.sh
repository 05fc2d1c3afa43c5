#!/usr/bin/env bash
# Type-checks and compiles the greet kind and its test (tsc, strict), then runs the test
# with the SDK's runner (Node, no host, no wasm).
# SPINDLE_JS_TOOLCHAIN: the npm prefix holding typescript and @types/node (default: the
#   repo's target/toolchains/js). SPINDLE_SDK: the SDK's directory (default: guest-sdk/js).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
toolchain="${SPINDLE_JS_TOOLCHAIN:-$repo/target/toolchains/js}"
sdk="$(cd "${SPINDLE_SDK:-$repo/guest-sdk/js}" && pwd)"
mkdir -p "$here/node_modules/@spindle"
ln -sfn "$sdk" "$here/node_modules/@spindle/guest"
cd "$here"
rm -rf build
node "$toolchain/node_modules/typescript/bin/tsc" -p . --typeRoots "$toolchain/node_modules/@types"
exec node --test build/test/
