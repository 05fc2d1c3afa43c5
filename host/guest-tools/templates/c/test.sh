#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's native runner (gcc, with the
# address and undefined-behaviour sanitizers; no host, no wasm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPINDLE_WIT="$here/wit" SPINDLE_C_TOOLCHAIN="${SPINDLE_C_TOOLCHAIN:-$here/.toolchain}" \
    exec "$here/spindle/test-kind.sh" "$here/test_{{module}}.c" "$here/{{module}}.c"
