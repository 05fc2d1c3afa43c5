#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's runner in plain CPython (no host, no wasm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 exec "${PYTHON:-python3}" -m unittest -v test_{{module}}
