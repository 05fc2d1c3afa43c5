#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's runner in Node (no host, no wasm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# What `npm install` does for the `file:` dependency, without needing npm for a test.
mkdir -p "$here/node_modules/@spindle"
ln -sfn "../../spindle-guest" "$here/node_modules/@spindle/guest"
cd "$here"
exec node --test test/
