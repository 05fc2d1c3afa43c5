#!/usr/bin/env bash
# Spindle next to graphile-worker on one durable PostgreSQL server, then Spindle on
# SQLite; prints the figures side by side with the ratio. Not part of the test suite.
#
#   bench/compare.sh                       # 20,000 jobs, concurrency 192 (Spindle's default) for both systems
#   JOBS=50000 CONCURRENCY=64 bench/compare.sh
#   SPINDLE_ARGS="--queued 1000,100000" bench/compare.sh    # extra `spindle bench` flags
#
# It builds the guests and a release `spindle`, installs PostgreSQL from Debian's
# packages when missing, starts a throwaway server with default durability
# (synchronous_commit=on, fsync=on) on 127.0.0.1 under the system temp directory, runs
# the graphile-worker peer (bench/graphile-worker, Node 22 from npm) and then
# `spindle bench` on PostgreSQL and on SQLite. JSON results go to target/bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-20000}
CONCURRENCY=${CONCURRENCY:-192}
RATE=${RATE:-200}
SECS=${SECS:-10}
WARMUP=${WARMUP:-2}
OUT=${OUT:-$ROOT/target/bench}
mkdir -p "$OUT"

echo "==> building the guests and a release spindle" >&2
cargo xtask guests >&2
cargo build --release -p spindle-cli >&2
SPINDLE=$ROOT/target/release/spindle

echo "==> PostgreSQL (durable defaults)" >&2
if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends postgresql >&2
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# Under the system temp directory, owned by postgres: the server refuses to run as root,
# and the postgres user must be able to reach the directory.
PGDIR=$(mktemp -d "${TMPDIR:-/tmp}/spindle-bench-pg.XXXXXX")
chmod 755 "$PGDIR"
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
chown postgres:postgres "$PGDIR" 2>/dev/null || sudo chown postgres:postgres "$PGDIR"
stop_server() {
    as_postgres "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$PGDIR" 2>/dev/null || sudo rm -rf "$PGDIR"
}
trap stop_server EXIT
PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
as_postgres "$PGBIN/initdb" -D "$PGDIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >/dev/null
as_postgres "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PGDIR -c max_connections=500 -c synchronous_commit=on -c fsync=on" \
    start >/dev/null
URL="postgres://postgres@127.0.0.1:$PORT/postgres"
echo "    $("$PGBIN/postgres" --version) on $URL" >&2

echo "==> graphile-worker (Node 22 from npm)" >&2
(cd bench/graphile-worker && npm ci --no-audit --no-fund --loglevel=error >&2)
bench/graphile-worker/node_modules/.bin/node bench/graphile-worker/bench.mjs --url "$URL" \
    --jobs "$JOBS" --concurrency "$CONCURRENCY" --rate "$RATE" --secs "$SECS" --warmup "$WARMUP" \
    > "$OUT/graphile-worker.json"

COMMON=(--jobs "$JOBS" --concurrency "$CONCURRENCY" --latency-rate "$RATE" --latency-secs "$SECS"
    --warmup-secs "$WARMUP" --guests "$ROOT/target/guests")
echo "==> spindle bench --backend postgres" >&2
# shellcheck disable=SC2086 # SPINDLE_ARGS is a list of flags
"$SPINDLE" bench --backend postgres --database-url "$URL" "${COMMON[@]}" ${SPINDLE_ARGS:-} \
    --json-file "$OUT/spindle-postgres.json"
echo "==> spindle bench --backend sqlite" >&2
# shellcheck disable=SC2086
"$SPINDLE" bench --backend sqlite "${COMMON[@]}" ${SPINDLE_ARGS:-} --json-file "$OUT/spindle-sqlite.json"

echo
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain --untracked-files=no -- host 2>/dev/null | grep -q . && echo ", host/ modified" || true)
echo "Spindle at commit $COMMIT$DIRTY; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
node bench/side-by-side.mjs "$OUT/graphile-worker.json" "$OUT/spindle-postgres.json" "$OUT/spindle-sqlite.json"
