#!/usr/bin/env bash
# The C SDK's own tests, natively, with every call checked for memory the SDK leaves.
# Tools as for ../test-kind.sh (SPINDLE, CC, CJSON_DIR, SPINDLE_SANITIZE).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPINDLE_TEST_LEAKS=1 exec "$here/../test-kind.sh" "$here/test_probe.c" "$here/probe.c"
