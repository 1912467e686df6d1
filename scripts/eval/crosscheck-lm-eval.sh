#!/usr/bin/env bash
# `sweep eval` side by side with lm-eval 0.4.13 running InferenceX's gsm8k.yaml exactly as
# run_lm_eval.sh invokes it, both against one answer server (scripts/eval/answer_server.py: the
# same answers to the same questions). Checks that
#   - every request body is the same (messages, model, max_tokens, temperature, stop, seed, top_p);
#   - the scores, their standard errors, n-samples and task_hashes are the same, to the last bit;
#   - InferenceX's collect_eval_results.py and validate_scores.py read sweep's folder;
#   - lm-eval's own filters and metric give the table sweep-results/src/eval/score.rs tests against.
# Needs the shared data (SWEEP_SHARED_DATA) and PyPI; about two minutes (the venv is cached).
#
# Usage: scripts/eval/crosscheck-lm-eval.sh [--sweep target/debug/sweep] [--limit N] [--install-only]
#   --install-only: make the lm-eval venv and stop (CI installs it while it builds).
set -euo pipefail
cd "$(dirname "$0")/../.."

sweep=target/debug/sweep
limit=""
install_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --install-only) install_only=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
cache="${SWEEP_CACHE:-$HOME/.cache/sweep}"
venv="$cache/lm-eval-0.4.13"
if [ ! -x "$venv/bin/lm_eval" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "lm-eval[api]==0.4.13" tabulate pyyaml
fi
[ "$install_only" = 1 ] && exit 0
shared="$(realpath "${SWEEP_SHARED_DATA:-../shared/data}")"
evals="$shared/inferencex/evals"
[ -f "$evals/gsm8k.yaml" ] || { echo "crosscheck-lm-eval: $evals/gsm8k.yaml not found (set SWEEP_SHARED_DATA)" >&2; exit 1; }

py="$venv/bin/python"

work="$(mktemp -d)"
port="$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$py" scripts/eval/answer_server.py "$port" "$shared/gsm8k/test.jsonl" "$work/bodies-lm-eval.jsonl" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT

# InferenceX's task file, reading the same splits from disk instead of the Hub.
"$py" - "$evals/gsm8k.yaml" "$shared/gsm8k" "$work/gsm8k.yaml" <<'PY'
import sys
src, data, out = sys.argv[1:]
text = open(src).read()
old = "dataset_path: openai/gsm8k\ndataset_name: main\n"
assert old in text, "gsm8k.yaml changed: update crosscheck-lm-eval.sh"
text = text.replace(old, f"dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n    train: {data}/train.jsonl\n    test: {data}/test.jsonl\n")
open(out, "w").write(text)
PY

for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.2; done
echo "== lm-eval 0.4.13 (run_lm_eval.sh's invocation)"
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 OPENAI_API_KEY=EMPTY "$venv/bin/lm_eval" --model local-chat-completions --apply_chat_template \
  --tasks "$work/gsm8k.yaml" --output_path "$work/lm-eval" --log_samples \
  --model_args "model=answer-server,base_url=http://127.0.0.1:$port/v1/chat/completions,api_key=EMPTY,eos_string=</s>,max_retries=5,num_concurrent=16,timeout=1800,tokenized_requests=False,max_length=16384" \
  --gen_kwargs "max_tokens=12288,temperature=0,top_p=1" ${limit:+--limit "$limit"} > "$work/lm-eval.log" 2>&1 \
  || { tail -30 "$work/lm-eval.log"; exit 1; }

echo "== sweep eval"
kill $server; wait $server 2>/dev/null || true
"$py" scripts/eval/answer_server.py "$port" "$shared/gsm8k/test.jsonl" "$work/bodies-sweep.jsonl" &
server=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 0.2; done
"$sweep" eval --url "http://127.0.0.1:$port" --concurrency 16 --out "$work/sweep" --model-prefix dsv4 ${limit:+--limit "$limit"}

echo "== compare"
"$py" - "$work" <<'PY'
import glob, json, sys
work = sys.argv[1]
def bodies(name):
    return {b["messages"][-1]["content"]: b for b in map(json.loads, open(f"{work}/{name}", encoding="utf-8"))}
a, b = bodies("bodies-lm-eval.jsonl"), bodies("bodies-sweep.jsonl")
assert a.keys() == b.keys(), f"different questions asked: {len(a)} vs {len(b)}"
diff = [k for k in a if a[k] != b[k]]
assert not diff, f"{len(diff)} request bodies differ, e.g. {json.dumps(a[diff[0]])[:300]} vs {json.dumps(b[diff[0]])[:300]}"
lm = json.load(open(glob.glob(f"{work}/lm-eval/*/results_*.json")[0]))
sw = json.load(open(glob.glob(f"{work}/sweep/results_*.json")[0]))
for k, v in lm["results"]["gsm8k"].items():
    if k.startswith("exact_match"):
        assert sw["results"]["gsm8k"][k] == v or abs(sw["results"]["gsm8k"][k] - v) < 1e-15, (k, v, sw["results"]["gsm8k"][k])
for k in ["n-samples", "task_hashes"]:
    assert lm[k] == sw[k], (k, lm[k], sw[k])
assert lm["config"]["limit"] == sw["config"]["limit"], (lm["config"]["limit"], sw["config"]["limit"])
print(f"{len(a)} request bodies identical; scores, stderr, n-samples and task_hashes equal:",
      {k: v for k, v in sw["results"]["gsm8k"].items() if k.startswith("exact_match,")})
PY

echo "== InferenceX's collector and validator on sweep's folder"
(cd "$work/sweep" && "$py" "$evals/collect_eval_results.py" . crosscheck >/dev/null && "$py" - <<'PY'
import json
row = json.load(open("agg_eval_crosscheck.json"))[0]
ours = json.load(open("agg_eval.json"))[0]
for k, v in row.items():
    if k != "source":
        assert ours.get(k) == v, (k, v, ours.get(k))
print("collect_eval_results.py row = sweep's agg_eval.json row")
PY
)
# The answers are mostly wrong by design: the validator must read the scores and fail them.
if (cd "$work/sweep" && "$py" "$evals/validate_scores.py" --thresholds "$shared/inferencex/thresholds.yaml" > "$work/validate.log" 2>&1); then
  echo "validate_scores.py passed scores that are below every threshold" >&2; exit 1
fi
grep -q "FAIL: gsm8k exact_match,strict-match" "$work/validate.log" || { cat "$work/validate.log"; exit 1; }
echo "validate_scores.py reads the results (and fails them, as it should)"

echo "== lm-eval's filters and metric on the table score.rs tests against"
"$py" scripts/eval/lm_eval_score_table.py > "$work/table.txt"
while IFS= read -r row; do
  grep -qF -- "$row" sweep-results/src/eval/score.rs || { echo "not in score.rs: $row" >&2; exit 1; }
done < "$work/table.txt"
echo "$(wc -l < "$work/table.txt") rows as score.rs has them"
