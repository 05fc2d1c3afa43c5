#!/usr/bin/env bash
# The kind's local test: tsc checks and compiles the kind and its test (strict), then
# whole jobs run through the SDK's runner in Node (no host, no wasm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
toolchain=${SPINDLE_JS_TOOLCHAIN:-$here}
if [[ ! -d "$toolchain/node_modules/typescript" ]]; then
    (cd "$here" && npm install --no-audit --no-fund)
fi
mkdir -p "$here/node_modules/@spindle"
ln -sfn "../../spindle-guest" "$here/node_modules/@spindle/guest"
cd "$here"
rm -rf build
node "$toolchain/node_modules/typescript/bin/tsc" -p . --typeRoots "$toolchain/node_modules/@types"
exec node --test build/test/
