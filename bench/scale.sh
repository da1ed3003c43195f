#!/usr/bin/env bash
# Jobs per second with 1, 2 and 4 `maljan worker` processes on small samples, on PostgreSQL and
# on SQLite: JOBS samples submitted first, then the workers started together (--exit-when-idle)
# and timed until the last one exits. PostgreSQL: a throwaway cluster (Debian's postgresql, as
# maljan-testkit starts it) on a free port. Usage: bench/scale.sh [MALJAN_BINARY] [JOBS]
set -euo pipefail
BIN="${1:-${CARGO_TARGET_DIR:-target}/debug/maljan}"
JOBS="${2:-40}"
PGBIN="${MALJAN_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}"
WORK="$(mktemp -d)"
chmod 755 "$WORK"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
as_pg() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi; }
mkdir "$WORK/pg"; [ "$(id -u)" = 0 ] && chown postgres: "$WORK/pg"
as_pg "$PGBIN/initdb" -D "$WORK/pg/data" -U maljan --auth=trust -E UTF8 --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -l "$WORK/pg/log" -w -o "-p $PORT -k $WORK/pg -c listen_addresses=127.0.0.1" start >/dev/null
trap 'as_pg "$PGBIN/pg_ctl" -D "$WORK/pg/data" -m immediate stop >/dev/null; rm -rf "$WORK"' EXIT

for i in $(seq 1 "$JOBS"); do printf 'MZ small sample %s http://host%s.example.com/p\n' "$i" "$i" > "$WORK/s$i.bin"; done

echo "engine    workers  jobs  seconds  jobs/s"
for engine in postgres sqlite; do
  for n in 1 2 4; do
    home="$WORK/home-$engine-$n"; mkdir -p "$home"
    if [ "$engine" = postgres ]; then
      db="db_$n"; "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U maljan "$db"
      url="postgres://maljan@127.0.0.1:$PORT/$db"
    else
      url="sqlite:$home/ledger.sqlite3"
    fi
    export MALJAN_HOME="$home" MALJAN_DATABASE_URL="$url"
    "$BIN" db migrate >/dev/null
    for i in $(seq 1 "$JOBS"); do "$BIN" submit "$WORK/s$i.bin" >/dev/null; done
    start=$(date +%s.%N)
    pids=()
    for _ in $(seq 1 "$n"); do (cd "$home" && "$BIN" worker --exit-when-idle 2>/dev/null) & pids+=($!); done
    wait "${pids[@]}"
    end=$(date +%s.%N)
    done_jobs=$("$BIN" jobs list --json --limit 100000 | python3 -c 'import json,sys; print(sum(j["state"] in ("complete","degraded") and j["attempts"]==1 for j in json.load(sys.stdin)))')
    python3 -c "d=$end-$start; print(f'$engine  {$n:>9}  {$done_jobs:>4}  {d:7.2f}  {$done_jobs/d:6.2f}')"
  done
done
