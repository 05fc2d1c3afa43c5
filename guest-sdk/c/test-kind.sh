#!/usr/bin/env bash
# Builds a C kind's native test and runs it: `test-kind.sh TEST.c KIND.c [MORE.c ...]`.
#
# The test includes spindle_testing.h, which stands in for the host; the kind, its
# bindings and cJSON are compiled with the build machine's compiler (no wasm), with
# AddressSanitizer and UBSan when the compiler has them, so an ownership slip (a freed
# literal, a double free, a leak in the parent) fails the test instead of a deployment.
#
# Tools from the environment: CC (default gcc), SPINDLE (default `spindle`), CJSON_DIR
# (default: Debian's source, fetched once by fetch-cjson.sh into
# $SPINDLE_C_TOOLCHAIN/cjson), SPINDLE_WIT, SPINDLE_SANITIZE (default
# `address,undefined`; empty for none), CFLAGS (default -O1 -g).
set -euo pipefail

[[ $# -ge 2 ]] || { echo "usage: test-kind.sh TEST.c KIND.c [MORE.c ...]" >&2; exit 2; }
sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$sdk/../.." && pwd)
cc=${CC:-gcc}
spindle=${SPINDLE:-spindle}

wit_args=()
wit=${SPINDLE_WIT:-$repo/wit}
[[ -f "$wit/job.wit" ]] && wit_args=(--wit "$wit")

cjson=${CJSON_DIR:-}
if [[ -z "$cjson" ]]; then
    cjson=$("$sdk/fetch-cjson.sh" "${SPINDLE_C_TOOLCHAIN:-$repo/target/toolchains/c}/cjson")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$spindle" guest bindgen --lang c --out "$work/bindings" "${wit_args[@]}" >"$work/bindgen.log" 2>&1 \
    || { cat "$work/bindgen.log" >&2; exit 1; }

# The world's other imports (wasi:http and what it uses), as weak stubs that say what
# the local runner lacks; spindle_testing.h defines the spindle ones and the wasi:http
# calls spindle_http_send makes, which take the stubs' place.
awk '
    BEGIN { print "#include <stdint.h>\n#include <stddef.h>\n#include <stdbool.h>"
            print "__attribute__((noreturn)) void spindle__test_unavailable(const char *import);" }
    /^extern .* __wasm_import_[a-z0-9_]+\(.*\);$/ && !/__wasm_import_spindle_job_/ {
        line = $0; sub(/^extern /, "", line); sub(/\);$/, "", line)
        open = index(line, "("); head = substr(line, 1, open - 1); args = substr(line, open + 1)
        n = split(head, words, " "); name = words[n]; ret = substr(head, 1, length(head) - length(name))
        params = ""; uses = ""
        if (args != "" && args != "void") {
            count = split(args, types, ", ")
            for (i = 1; i <= count; i++) {
                # Most parameters come unnamed (`int32_t`, `uint8_t *`); a few are named.
                w = split(types[i], parts, " "); last = parts[w]
                if (w == 1 || last ~ /\*$/ || last ~ /^(u?int(8|16|32|64)_t|size_t|float|double|bool)$/) {
                    arg = "a" i; params = params (i > 1 ? ", " : "") types[i] " " arg
                } else {
                    arg = last; params = params (i > 1 ? ", " : "") types[i]
                }
                uses = uses " (void)" arg ";"
            }
        } else { params = "void" }
        printf "__attribute__((weak)) %s%s(%s) {%s spindle__test_unavailable(\"%s\"); }\n", ret, name, params, uses, name
    }' "$work/bindings/job_kind.c" >"$work/stubs.c"

sanitize=${SPINDLE_SANITIZE-address,undefined}
san_flags=()
if [[ -n "$sanitize" ]] && echo 'int main(void){return 0;}' | "$cc" -fsanitize="$sanitize" -x c - -o "$work/probe" 2>/dev/null; then
    # Fatal, so undefined behaviour stops the call like a trap.
    san_flags=(-fsanitize="$sanitize" -fno-sanitize-recover=all -fno-omit-frame-pointer)
fi

# shellcheck disable=SC2086 # CFLAGS is a list of flags
flags=(${CFLAGS:--O1 -g} "${san_flags[@]}" -I "$sdk" -I "$work/bindings" -I "$cjson" -ffunction-sections -fdata-sections)
"$cc" "${flags[@]}" -w -c "$work/bindings/job_kind.c" -o "$work/job_kind.o"
"$cc" "${flags[@]}" -w -c "$cjson/cJSON.c" -o "$work/cJSON.o"
"$cc" "${flags[@]}" -w -c "$work/stubs.c" -o "$work/stubs.o"
"$cc" "${flags[@]}" -Wall -o "$work/test" "$@" "$work/job_kind.o" "$work/cJSON.o" "$work/stubs.o" -Wl,--gc-sections
"$work/test"
