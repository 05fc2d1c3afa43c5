#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
# componentize-js comes from $SPINDLE_JS_TOOLCHAIN (an npm prefix), or from this
# project's devDependencies (`npm install`, run here when node_modules lacks it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
toolchain=${SPINDLE_JS_TOOLCHAIN:-$here}
if [[ ! -d "$toolchain/node_modules/@bytecodealliance/componentize-js" ]]; then
    (cd "$here" && npm install --no-audit --no-fund)
fi
cd "$here"
node "$here/spindle-guest/tools/componentize.mjs" "$here/{{module}}.js" "$out" --toolchain "$toolchain" --wit "$here/wit"
echo "built $out"
