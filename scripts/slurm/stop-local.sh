#!/usr/bin/env bash
# Stops the single-host Slurm started by start-local.sh (slurmd, slurmctld, munged); jobs still
# running are cancelled first. Idempotent.
set -euo pipefail
if command -v scancel >/dev/null && [ -f /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null; then
  scancel --user="$(id -un)" >/dev/null 2>&1 || true
fi
# By pid file only: never signal processes by name.
stop() {
  local name="$1" pidfile="$2" pid=""
  [ -f "$pidfile" ] && pid="$(cat "$pidfile" 2>/dev/null || true)"
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then return 0; fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}
stop slurmd /run/slurmd.pid
stop slurmctld /run/slurmctld.pid
stop munged /run/munge/munged.pid
echo "slurm stopped"
