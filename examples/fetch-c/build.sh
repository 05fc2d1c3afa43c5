#!/usr/bin/env bash
# Builds the fetch kind into a component: `build.sh OUT.wasm`.
#
# The SDK's build-kind.sh does the work; it finds its tools through SPINDLE, CLANG,
# WASI_SYSROOT and CJSON_DIR (see there). SPINDLE_SDK (default: the repo's guest-sdk/c)
# and SPINDLE_WIT (default: the repo's wit/) are honoured as for the other languages.
set -euo pipefail

out=${1:?usage: build.sh OUT.wasm}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
SPINDLE_WIT=${SPINDLE_WIT:-$repo/wit} exec "${SPINDLE_SDK:-$repo/guest-sdk/c}/build-kind.sh" "$out" "$here/fetch.c"
