#!/usr/bin/env bash
# Stops the server scripts/pg/start.sh started (same DIR argument) and removes its cluster.
set -euo pipefail
dir=${1:-${TMPDIR:-/tmp}/sweep-pg}
bindir=$(dirname "$(readlink -f "$(command -v pg_ctl 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)")")
as_owner=()
[[ $(id -u) -eq 0 ]] && as_owner=(runuser -u postgres --)
if [[ -f "$dir/data/PG_VERSION" ]]; then
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
fi
rm -rf "$dir"
