#!/usr/bin/env bash
# A bounded mutation fuzz run over every input sweep reads: master configs, recipes, runners,
# golden AL curves, the changelog, InferenceX's shared inputs, engine profiles, traces (Weka
# JSONL, gzip, .json, mooncake), InferenceX agentic aggregates (`sweep import`), GSM8K splits,
# eval sample logs, chat-completions replies as `sweep eval` reads them, `sweep verify`'s pr-facts
# files and eval results, and file names committed beside a change `sweep verify` must reject
# (in a git repository made per input; a verdict of PASS is a finding), each mutated with a seed
# (byte flips, truncation, duplicated or deleted lines, deep nesting, huge numbers, renamed keys,
# swapped values, invalid UTF-8, long strings, newline floods) and run through the real loaders in
# process (harness/examples/fuzz).
# A finding is a panic, an input slower than the per-input cap or using more than 512 MB, or an
# error that does not name its file or echoes its input; each is saved under the findings folder
# with the command that replays it, and the script exits non-zero.
#
# Usage: scripts/fuzz.sh [--budget SECONDS] [--seed N] [--cap SECONDS] [--findings DIR] [--profile P]
#   --budget    wall-clock seconds of fuzzing (default 150; the build comes on top)
#   --seed      the run's seed (default: from the clock); printed, so a run can be repeated
#   --cap       seconds one input may take (default 2)
#   --findings  where findings go (default target/fuzz-findings)
#   --profile   the optimised Cargo profile to build with (default release; CI passes `ci`)
# Seeds come from this repository and, when SWEEP_SHARED_DATA names the shared data, from its
# InferenceX inputs and small real traces.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=150
seed="$(date +%s)"
cap=2
findings=target/fuzz-findings
profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --cap) cap="$2"; shift 2 ;;
    --findings) findings="$2"; shift 2 ;;
    --profile) profile="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

echo "fuzz: seed $seed, budget ${budget} s, cap ${cap} s per input, findings in $findings"
# Optimized: the per-input cap judges the loaders, not an unoptimized build (a gzip trace that
# inflates to 133 MB of newlines took 2.6 s in a debug build, 0.2 s optimized).
cargo build --profile "$profile" --quiet -p harness --example fuzz
rm -rf "$findings"
# Panics inside the loaders are findings, reported with their input: no backtraces to resolve.
RUST_BACKTRACE=0 "target/$profile/examples/fuzz" --budget "$budget" --seed "$seed" --cap "$cap" --findings "$findings"
