#!/usr/bin/env bash
# Wall time of `sweep verify` on the real InferenceX master config (152 keys) and changelog
# (772 entries), in a git repository made in a temp dir with InferenceX's layout
# (configs/nvidia-master.yaml, perf-changelog.yaml, MODELS.md, utils/evals/thresholds.yaml,
# golden_al_distribution/, docs/PR_REVIEW_CHECKLIST.md). Two pull requests:
#   last-entry    the changelog's last entry appended to the rest (the everyday case);
#   whole-config  every master entry and every changelog entry added at once (the worst case:
#                 152 changed configs, 772 appended entries, every check reading all of them).
# Each is timed RUNS times (default 5); prints every time and the median. Needs the shared data
# (SWEEP_SHARED_DATA, default ../shared/data) and a release build.
#
#   scripts/bench/verify.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA="${SWEEP_SHARED_DATA:-../shared/data}"
IX="$DATA/inferencex"
[ -f "$IX/nvidia-master.yaml" ] || { echo "shared data not found at $DATA (set SWEEP_SHARED_DATA)"; exit 2; }
BIN="${SWEEP_BIN:-$PWD/target/release/sweep}"
[ -x "$BIN" ] || { echo "build first: cargo build --release -p harness"; exit 2; }
RUNS="${1:-5}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
g() { git -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false "$@"; }

layout() { # DIR: the InferenceX files other than the master config and changelog
  mkdir -p "$1/utils/evals" "$1/docs" "$1/configs"
  cp "$IX/MODELS.md" "$1/"
  cp "$IX/thresholds.yaml" "$1/utils/evals/"
  cp "$IX/runners.yaml" "$1/configs/"
  cp -r "$IX/golden_al_distribution" "$1/"
  cp "$IX/verifier/PR_REVIEW_CHECKLIST.md" "$1/docs/"
}

# last-entry
r="$tmp/last-entry"; mkdir -p "$r"; layout "$r"
cp "$IX/nvidia-master.yaml" "$r/configs/"
python3 - "$IX/perf-changelog.yaml" "$r/perf-changelog.yaml" <<'PY'
import sys
t = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(t[: t.rfind("\n- config-keys:") + 1])
PY
(cd "$r" && g init -q && g add -A && g commit -qm base && cp "$IX/perf-changelog.yaml" . && g commit -qam head)

# whole-config
r="$tmp/whole-config"; mkdir -p "$r"; layout "$r"
(cd "$r" && g init -q && g add -A && g commit -qm base)
cp "$IX/nvidia-master.yaml" "$r/configs/"; cp "$IX/perf-changelog.yaml" "$r/"
(cd "$r" && g add -A && g commit -qm head)

for case in last-entry whole-config; do
  times=()
  for _ in $(seq "$RUNS"); do
    start=$(date +%s.%N)
    set +e
    (cd "$tmp/$case" && "$BIN" verify --base HEAD~1 --review-date 2026-12-01 > "$tmp/$case.out")
    code=$?
    set -e
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p")
  printf '%-13s exit %s, %s runs: %s s; median %.3f s (load average %s)\n' \
    "$case" "$code" "$RUNS" "${times[*]}" "$median" "$(cut -d' ' -f1 /proc/loadavg)"
  printf '              %s failing check row(s)\n' "$(grep -c '^❌' "$tmp/$case.out" || true)"
done
