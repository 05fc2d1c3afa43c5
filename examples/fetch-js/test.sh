#!/usr/bin/env bash
# Runs the fetch kind's local test with the SDK's runner (Node, no host, no wasm).
# SPINDLE_SDK: the SDK's directory (default: the repo's guest-sdk/js).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
sdk="$(cd "${SPINDLE_SDK:-$repo/guest-sdk/js}" && pwd)"

# What `npm install` would do for the package.json's `file:` dependency, without npm.
mkdir -p "$here/node_modules/@spindle"
ln -sfn "$sdk" "$here/node_modules/@spindle/guest"

cd "$here"
exec node --test test/
