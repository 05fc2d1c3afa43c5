#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
    rustup target add wasm32-wasip2
fi
cd "$here"
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-$here/target}/wasm32-wasip2/release/{{module}}.wasm" "$out"
echo "built $out"
