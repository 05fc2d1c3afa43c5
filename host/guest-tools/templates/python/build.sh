#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
# componentize-py comes from $COMPONENTIZE_PY, or is installed from PyPI into ./.venv.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
if [[ -z "${COMPONENTIZE_PY:-}" ]]; then
    if [[ ! -x "$here/.venv/bin/componentize-py" ]]; then
        "${PYTHON:-python3}" -m venv "$here/.venv"
        "$here/.venv/bin/pip" install --quiet componentize-py==0.25.1
    fi
    COMPONENTIZE_PY="$here/.venv/bin/componentize-py"
fi
cd "$here"
PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 "${PYTHON:-python3}" -m spindle_guest.build \
    {{module}}:kind "$out" --path "$here" --wit "$here/wit" --componentize-py "$COMPONENTIZE_PY"
echo "built $out"
