#!/usr/bin/env bash
# Runs the fetch kind's local test through the SDK's runner: native `go test`, no host,
# no wasm. GO names the toolchain (default `go`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# The SDK is a local module (see go.mod's replace): nothing is fetched.
GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off exec "${GO:-go}" test -count=1 -v ./...
