#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's runner, native `go test` (no host,
# no wasm). GO names the toolchain (default `go`).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# The SDK is a local module (go.mod's replace): nothing is fetched.
GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off exec "${GO:-go}" test -count=1 ./...
