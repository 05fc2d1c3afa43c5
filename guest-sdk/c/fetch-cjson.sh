#!/usr/bin/env bash
# Fetches cJSON's source from Debian into DEST (once; later runs reuse it) and prints the
# directory holding cJSON.c and cJSON.h: `fetch-cjson.sh DEST`.
#
# Debian's source package, not a vendored copy: `dpkg-source` applies Debian's security
# patches (bookworm ships 1.7.15-1+deb12u4), and the archive's signature is checked
# against the system keyring. The system's apt configuration is not touched: the
# source list and the package lists live in DEST.
#
# CJSON_SUITE (default `bookworm`) and CJSON_MIRROR (default deb.debian.org) pick the
# archive; CJSON_KEYRING the keyring that signs it.
set -euo pipefail

dest=${1:?usage: fetch-cjson.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

found() { find "$dest" -maxdepth 2 -name cJSON.c -printf '%h\n' 2>/dev/null | sort | tail -1; }
if [[ -n "$(found)" ]]; then found; exit 0; fi

apt_dir=$dest/apt
mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial"
cat > "$apt_dir/sources/debian-src.sources" <<SOURCES
Types: deb-src
URIs: ${CJSON_MIRROR:-http://deb.debian.org/debian}
Suites: ${CJSON_SUITE:-bookworm}
Components: main
Signed-By: ${CJSON_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
SOURCES

apt_opts=(
    -o Dir::Etc::SourceList=/dev/null
    -o Dir::Etc::SourceParts="$apt_dir/sources"
    -o Dir::State::Lists="$apt_dir/lists"
    -o Dir::Cache="$apt_dir/cache"
    -o Debug::NoLocking=1
)
# Quiet on success; apt's own words on failure.
log=$apt_dir/fetch.log
if ! { apt-get -q "${apt_opts[@]}" update && (cd "$dest" && apt-get -q "${apt_opts[@]}" source cjson); } >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch-cjson.sh: could not fetch Debian's cjson source (log above)" >&2
    exit 1
fi
dir=$(found)
[[ -n "$dir" ]] || { echo "fetch-cjson.sh: no cJSON.c after unpacking in $dest" >&2; exit 1; }
echo "$dir"
