#!/usr/bin/env bash
# Builds the fetch kind into a component: `build.sh OUT.wasm`.
#
# Tools from the environment: COMPONENTIZE_PY (default `componentize-py`), PYTHON to run
# the SDK's build driver (default `python3`), SPINDLE_WIT and SPINDLE_SDK (default: this
# repository's `wit/` and `guest-sdk/python/`).
set -euo pipefail

out=${1:?usage: build.sh OUT.wasm}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
sdk=${SPINDLE_SDK:-$repo/guest-sdk/python}
wit=${SPINDLE_WIT:-$repo/wit}

PYTHONPATH="$sdk${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 "${PYTHON:-python3}" -m spindle_guest.build \
    fetch:kind "$out" --path "$here" --wit "$wit" --componentize-py "${COMPONENTIZE_PY:-componentize-py}"
