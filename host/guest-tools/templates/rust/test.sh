#!/usr/bin/env bash
# The kind's local test: whole jobs through the SDK's runner, natively (no host, no wasm).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
exec cargo test --quiet
