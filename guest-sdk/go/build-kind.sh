#!/usr/bin/env bash
# Builds a Go job kind into a component: `build-kind.sh KIND_DIR OUT.wasm`.
#
# KIND_DIR is a Go module whose package (KIND_PKG, default the module's root package)
# holds the kind as a package-level *guest.Kind (KIND_VAR, default `Kind`). The recipe:
#   1. `spindle guest bindgen --lang go`: wit-bindgen's Go bindings, a module
#      `wit_component` with a local copy of go.bytecodealliance.org/pkg;
#   2. the SDK's adapter (component/*.go) and a one-line kind.go go into its
#      `export_spindle_job_kind` package; go.mod points the SDK and the kind at their
#      directories (no module proxy is needed or asked);
#   3. `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`: a reactor core module;
#   4. `spindle guest componentize`: the world embedded, then the component, its WASI preview-1 imports
#      served by the reactor adapter, which gets its memory through the module's
#      `cabi_realloc` (Go's own break). Never `--realloc-via-memory-grow` for Go: the
#      adapter would then grow memory behind Go's allocator, whose heap later takes over
#      the adapter's pages (see README.md, "Memory").
#
# Tools from the environment: SPINDLE (default `spindle`), GO (default `go`, 1.24
# or newer; the bindings ask 1.27.1), SPINDLE_WIT (default: the contract compiled into
# SPINDLE), SPINDLE_SDK (default: this script's directory). WORK keeps the staging
# directory there instead of a temporary one that is removed.
set -euo pipefail

kind_dir=$(cd "${1:?usage: build-kind.sh KIND_DIR OUT.wasm}" && pwd)
out=${2:?usage: build-kind.sh KIND_DIR OUT.wasm}
sdk=$(cd "${SPINDLE_SDK:-$(dirname "${BASH_SOURCE[0]}")}" && pwd)
spindle=${SPINDLE:-spindle}
go=${GO:-go}
wit_args=()
[[ -n ${SPINDLE_WIT:-} ]] && wit_args=(--wit "$SPINDLE_WIT")

# Local modules only: no proxy, no checksum database, no toolchain download.
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOWORK=off

if [[ -n ${WORK:-} ]]; then
    work=$WORK
    rm -rf "$work/bindings"
    mkdir -p "$work"
else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi

module=$(cd "$kind_dir" && "$go" list -m)
package=${KIND_PKG:-$module}

"$spindle" guest bindgen --lang go --out "$work/bindings" "${wit_args[@]}" >/dev/null

export_dir="$work/bindings/export_spindle_job_kind"
mkdir -p "$export_dir"
cp "$sdk"/component/*.go "$export_dir/"
cat >"$export_dir/kind.go" <<EOF
//go:build wasip1

package export_spindle_job_kind

import kind "$package"

// exported is the kind this component runs.
var exported = kind.${KIND_VAR:-Kind}
EOF

(
    cd "$work/bindings"
    "$go" mod edit \
        -require=spindle.dev/guest@v0.0.0 -replace="spindle.dev/guest=$sdk" \
        -require="$module@v0.0.0" -replace="$module=$kind_dir"
    # -checklinkname=0: the bindings' runtime reaches runtime.sbrk by linkname, which Go
    # 1.23+ refuses by default; cabi_realloc needs it before the Go runtime is up.
    GOOS=wasip1 GOARCH=wasm "$go" build -buildmode=c-shared -trimpath -buildvcs=false \
        -ldflags=-checklinkname=0 -o "$work/core.wasm" .
)
"$spindle" guest componentize "$work/core.wasm" -o "$out" "${wit_args[@]}" >/dev/null
echo "built $out ($(wc -c <"$out") bytes)"
