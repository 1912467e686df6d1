# Shared by the scripts that replay against a local `sweep engine serve`: source it after setting
# `sweep_bin` and the `flags` array (the server's flags, without --port).
#   start_server LOG  starts the server on a free loopback port, waits until /health answers,
#                     and sets `url` and `server_pid`; exits the script if it does not come up.
#   stop_server       stops it (a no-op when none runs); scripts `trap stop_server EXIT`.
server_pid=""
start_server() {
  "$sweep_bin" engine serve "${flags[@]}" --port 0 2> "$1" &
  server_pid=$!
  for _ in $(seq 1 600); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$1" | head -1 || true)
    [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "engine server did not start; see $1" >&2
  exit 1
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
