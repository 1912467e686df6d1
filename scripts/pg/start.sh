#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the store tests, from the distribution's packages
# (Debian: `apt-get install -y postgresql`), and prints the line that points the tests at it:
#
#   eval "$(scripts/pg/start.sh)"      # export SWEEP_TEST_POSTGRES=postgres://sweep@127.0.0.1:55432/postgres
#   cargo test -p harness --test store
#   scripts/pg/stop.sh
#
# The cluster lives in DIR (default $TMPDIR/sweep-pg), listens on 127.0.0.1 only (port
# SWEEP_PG_PORT, default 55432), trusts local connections of the user `sweep`, and runs without
# fsync: it holds test data only. Run as root, the server runs as the `postgres` user the package
# creates (PostgreSQL refuses to run as root). Starting it again while it runs reuses it.
set -euo pipefail

dir=${1:-${TMPDIR:-/tmp}/sweep-pg}
port=${SWEEP_PG_PORT:-55432}

# The server's programs: on PATH, else the newest version under /usr/lib/postgresql.
bindir=""
if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
  bindir=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
else
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [[ -z "$bindir" || ! -x "$bindir/pg_ctl" ]]; then
  echo "scripts/pg/start.sh: PostgreSQL's server programs (initdb, pg_ctl) are not installed; on Debian: apt-get install -y postgresql" >&2
  exit 1
fi

as_owner=()
if [[ $(id -u) -eq 0 ]]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "scripts/pg/start.sh: running as root needs the 'postgres' user (created by the postgresql package)" >&2
    exit 1
  fi
  as_owner=(runuser -u postgres --)
fi

mkdir -p "$dir"
[[ ${#as_owner[@]} -gt 0 ]] && chown postgres "$dir"
data="$dir/data"
if [[ ! -f "$data/PG_VERSION" ]]; then
  "${as_owner[@]}" "$bindir/initdb" -D "$data" -U sweep --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    exit 1
  }
fi
if ! "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100" \
    start >/dev/null || {
    cat "$dir/server.log" >&2
    exit 1
  }
fi
echo "export SWEEP_TEST_POSTGRES=postgres://sweep@127.0.0.1:$port/postgres"
