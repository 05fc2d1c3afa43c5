#!/usr/bin/env bash
# Builds the fetch kind into a component: ./build.sh OUT.wasm
#
# SPINDLE_JS_TOOLCHAIN: the npm prefix holding @bytecodealliance/componentize-js@0.23.0
#   (default: the repo's target/toolchains/js; its node_modules is used)
# SPINDLE_WIT: the WIT folder (default: the repo's wit)
# SPINDLE_SDK: the JS SDK (default: the repo's guest-sdk/js)
# Extra arguments go to the SDK's componentize.mjs (e.g. --no-http, --features all).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 OUT.wasm [componentize options]" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$1"; shift
exec node "${SPINDLE_SDK:-$repo/guest-sdk/js}/tools/componentize.mjs" "$here/fetch.js" "$out" \
  --toolchain "${SPINDLE_JS_TOOLCHAIN:-$repo/target/toolchains/js}" \
  --wit "${SPINDLE_WIT:-$repo/wit}" "$@"
