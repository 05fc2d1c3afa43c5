#!/usr/bin/env bash
# The C SDK's own tests, natively, with every call checked for memory the SDK leaves
# (and, for HTTP, wasi:http resources it leaves undropped). Tools as for
# ../test-kind.sh (SPINDLE, CC, CJSON_DIR, SPINDLE_SANITIZE).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export SPINDLE_TEST_LEAKS=1
"$here/../test-kind.sh" "$here/test_probe.c" "$here/probe.c"
"$here/../test-kind.sh" "$here/test_http.c" "$here/http_probe.c"
