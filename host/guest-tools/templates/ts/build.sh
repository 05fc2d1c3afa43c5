#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
# `tsc` checks and compiles it (strict) into build/, then componentize-js builds that.
# The tools come from $SPINDLE_JS_TOOLCHAIN (an npm prefix), or from this project's
# devDependencies (`npm install`, run here when node_modules lacks them).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
toolchain=${SPINDLE_JS_TOOLCHAIN:-$here}
if [[ ! -d "$toolchain/node_modules/@bytecodealliance/componentize-js" || ! -d "$toolchain/node_modules/typescript" ]]; then
    (cd "$here" && npm install --no-audit --no-fund)
fi
# What `npm install` does for the `file:` dependency.
mkdir -p "$here/node_modules/@spindle"
ln -sfn "../../spindle-guest" "$here/node_modules/@spindle/guest"
cd "$here"
rm -rf build
node "$toolchain/node_modules/typescript/bin/tsc" -p . --typeRoots "$toolchain/node_modules/@types"
node "$here/spindle-guest/tools/componentize.mjs" "$here/build/{{module}}.js" "$out" --toolchain "$toolchain" --wit "$here/wit"
echo "built $out"
