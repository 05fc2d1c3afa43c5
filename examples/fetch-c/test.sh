#!/usr/bin/env bash
# Runs the fetch kind's local test with the SDK's native runner (no host, no wasm, no
# network: a fake upstream answers). Every call is also checked for memory left
# allocated and wasi:http resources left undropped (SPINDLE_TEST_LEAKS).
# Tools as for the SDK's test-kind.sh: CC, SPINDLE, CJSON_DIR, SPINDLE_SANITIZE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
SPINDLE_TEST_LEAKS=1 SPINDLE_WIT=${SPINDLE_WIT:-$repo/wit} exec "${SPINDLE_SDK:-$repo/guest-sdk/c}/test-kind.sh" \
    "$here/test_fetch.c" "$here/fetch.c"
