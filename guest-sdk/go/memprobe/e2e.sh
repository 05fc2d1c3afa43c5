#!/usr/bin/env bash
# Shows where a Go guest's memory ends, on a real host: builds the probe with the SDK's
# recipe, deploys it on a throwaway host and checks each size against what it must do.
#
#   guest-sdk/go/memprobe/e2e.sh            # the host's default cap, 64 MiB
#   MAX_MEMORY_MIB=256 guest-sdk/go/memprobe/e2e.sh
#
# Under a cap of C MiB a step's live heap succeeds up to C-5 MiB (59 of 64, 251 of
# 256: the rest is the module's data and the Go runtime) and fails past it with the clean
# `sandbox.memory-limit`. A build that lets the adapter grow memory for itself fails at
# any size (`sandbox.stack-overflow` in runtime.sigpanic and the like): this catches it.
#
# Tools from the environment: SPINDLE (a host with the guest tools, default
# `spindle`), GO (default `go`), PORT (default 17990). Exit 0 when every size did
# what it must.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
spindle=${SPINDLE:-spindle}
cap=${MAX_MEMORY_MIB:-64}
port=${PORT:-17990}
work=$(mktemp -d)
host_pid=
cleanup() {
    [[ -n $host_pid ]] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

SPINDLE=$spindle "$here/../build-kind.sh" "$here" "$work/memprobe.wasm"

"$spindle" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --max-memory-mib "$cap" \
    >"$work/host.log" 2>&1 &
host_pid=$!
export SPINDLE_SERVER=http://127.0.0.1:$port
for _ in $(seq 100); do
    [[ -s $work/data/operator-token ]] && "$spindle" tenant list --token "$(cat "$work/data/operator-token")" \
        >/dev/null 2>&1 && break
    sleep 0.1
done
SPINDLE_TOKEN=$("$spindle" tenant create probe --token "$(cat "$work/data/operator-token")" | tail -1)
export SPINDLE_TOKEN
"$spindle" deploy memprobe-go "$work/memprobe.wasm" >/dev/null

passed=0 failed=0
# expect MIB CHUNK_KIB WANT: WANT is `succeeded` or a failure code.
expect() {
    local id line
    id=$("$spindle" submit memprobe-go --input "{\"mib\":$1,\"chunk_kib\":$2}" | tail -1)
    line=$("$spindle" wait "$id" || true)
    if [[ $3 == succeeded && $line == *" succeeded "* ]] || [[ $3 != succeeded && $line == *"($3:"* ]]; then
        passed=$((passed + 1))
        echo "ok   $1 MiB in $2 KiB slices: $3"
    else
        failed=$((failed + 1))
        echo "FAIL $1 MiB in $2 KiB slices: want $3, got: $line"
    fi
}

limit=$((cap - 5))
for mib in 2 8 16 32 $((cap / 2 + cap / 4)); do
    expect "$mib" 64 succeeded
done
expect "$limit" 1024 succeeded
expect "$limit" $((limit * 1024)) succeeded
expect $((limit + 1)) 1024 sandbox.memory-limit
expect "$cap" 1024 sandbox.memory-limit

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
