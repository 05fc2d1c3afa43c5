#!/usr/bin/env bash
# Runs the fetch kind's local test through the SDK's runner: plain CPython, no host, no wasm.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
sdk=${SPINDLE_SDK:-$repo/guest-sdk/python}

cd "$here"
PYTHONPATH="$sdk:$here" PYTHONDONTWRITEBYTECODE=1 exec "${PYTHON:-python3}" -m unittest -v test_fetch
