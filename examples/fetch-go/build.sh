#!/usr/bin/env bash
# Builds the fetch kind into a component: `build.sh OUT.wasm`.
#
# Tools from the environment: GO (default `go`), SPINDLE (default `spindle`, whose
# `guest bindgen` and `guest componentize` the SDK's recipe uses), SPINDLE_WIT (default:
# this repository's `wit/`) and SPINDLE_SDK (default: this repository's `guest-sdk/go/`).
set -euo pipefail

out=${1:?usage: build.sh OUT.wasm}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
sdk=${SPINDLE_SDK:-$repo/guest-sdk/go}

SPINDLE_SDK=$sdk SPINDLE_WIT=${SPINDLE_WIT:-$repo/wit} exec "$sdk/build-kind.sh" "$here" "$out"
