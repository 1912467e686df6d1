#!/usr/bin/env python3
"""Scores a table of model responses with lm-eval's own gsm8k filters and exact_match metric, and
prints it as the Rust table in sweep-results/src/eval/score.rs (`LM_EVAL_TABLE`).

The filters and the metric are configured exactly as InferenceX's gsm8k.yaml configures them.
Run it in a venv with lm-eval installed (`pip install 'lm-eval==0.4.13'`):

    python scripts/eval/lm_eval_score_table.py
"""
import json

from lm_eval.api.metrics import exact_match_hf_evaluate
from lm_eval.filters.extraction import RegexFilter
from lm_eval.filters.selection import TakeFirstFilter

STRICT = [RegexFilter(regex_pattern=r"#### (\-?[0-9\.\,]+)", group_select=-1), TakeFirstFilter()]
FLEX = [RegexFilter(regex_pattern=r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1), TakeFirstFilter()]
IGNORE = [",", "\\$", "(?s).*#### ", "\\.$"]

# (response, gold answer as the dataset writes it)
CASES = [
    ("Let me think.\n#### 18", "She makes 9 * 2 = $<<9*2=18>>18.\n#### 18"),
    ("#### 18", "#### 18"),
    ("#### 18.", "#### 18"),
    ("#### 18\n", "#### 18"),
    ("#### $18", "#### 18"),
    ("The answer is $18.", "#### 18"),
    ("#### 1,600", "#### 1,600"),
    ("#### 1600", "#### 1,600"),
    ("#### 1,600", "#### 1600"),
    ("#### 16,00", "#### 1600"),
    ("#### -18", "#### 18"),
    ("#### -18", "#### -18"),
    ("#### 18.0", "#### 18"),
    ("#### 1.8", "#### 18"),
    ("#### 0.5", "#### .5"),
    ("18", "#### 18"),
    ("7 apples and 18", "#### 18"),
    ("#### 18\nWait, it is 20", "#### 18"),
    ("#### 18 #### 19", "#### 18"),
    ("####18", "#### 18"),
    ("#### ...", "#### 18"),
    ("#### -", "#### 18"),
    ("", "#### 18"),
    ("No number here.", "#### 18"),
    ("#### 5", "#### 5"),
    ("It is 5", "#### 5"),
    ("It is -5", "#### -5"),
    ("It costs $1,234.50 in total.", "#### 1234.50"),
    ("#### 1,234.50", "#### 1234.5"),
    ("The answer is 18.\n\n", "#### 18"),
    ("ANSWER: #### 18", "#### 18"),
    ("#### 18 dollars", "#### 18"),
    ("#### 18.\nQuestion: next 7", "#### 18"),
    ("#### 3.\n", "#### 3"),
    ("#### -.5", "#### -0.5"),
    ("#### 1e3", "#### 1000"),
    ("#### 2/3", "#### 2"),
    ("#### ١٨", "#### 18"),
    ("#### 18", "#### 18\n"),
    ("$$", "#### 18"),
    ("#### 10,", "#### 10"),
    ("The result: 4.2.", "#### 4.2"),
]


def filtered(chain, response):
    out = [[response]]
    for f in chain:
        out = list(f.apply(out, [None]))
    return out[0]


def score(pred, gold):
    return float(exact_match_hf_evaluate([pred], [gold], regexes_to_ignore=IGNORE, ignore_case=True)["exact_match"])


for response, gold in CASES:
    s, f = filtered(STRICT, response), filtered(FLEX, response)
    row = (response, gold, s, score(s, gold), f, score(f, gold))
    print("    (" + ", ".join(json.dumps(x, ensure_ascii=False) for x in row) + "),")
