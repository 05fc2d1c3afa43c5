#!/usr/bin/env bash
# Runs the greet kind's local test with the SDK's native runner (no host, no wasm).
# Tools as for the SDK's test-kind.sh: CC, SPINDLE, CJSON_DIR, SPINDLE_SANITIZE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
SPINDLE_WIT=${SPINDLE_WIT:-$repo/wit} exec "${SPINDLE_SDK:-$repo/guest-sdk/c}/test-kind.sh" \
    "$here/test_greet.c" "$here/greet.c"
