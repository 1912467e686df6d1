#!/usr/bin/env python3
"""An OpenAI-compatible chat server that answers gsm8k questions from the dataset, for comparing
`sweep eval` with lm-eval on the same answers (scripts/eval/crosscheck-lm-eval.sh). It is no model:
each question gets one of ten deterministic answers built from its gold answer (right, wrong,
malformed, empty), so both filters see every case. Every request body is appended to a log.

    python3 answer_server.py PORT TEST_JSONL BODIES_LOG
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, test_path, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
by_question = {}
for i, line in enumerate(open(test_path, encoding="utf-8")):
    doc = json.loads(line)
    by_question[doc["question"]] = (i, doc["answer"].split("#### ")[-1])
log = open(log_path, "a", encoding="utf-8")

VARIANTS = [
    lambda g: "Let me think.\n#### " + g,
    lambda g: "The answer is $" + g + ".",
    lambda g: "#### " + g + ".",
    lambda g: "I think it is 7.\n#### 8",
    lambda g: "",
    lambda g: "#### " + g + "\n\nQuestion: more 12",
    lambda g: "The total is " + g + " dollars, so 3 left.",
    lambda g: "#### -" + g,
    lambda g: "#### 1,234\nanswer " + g,
    lambda g: "Answer: " + g + ".0",
]


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            self.reply(200, {"object": "list", "data": [{"id": "answer-server"}]})
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = body["messages"][-1]["content"]
        if not last.startswith("Question: "):
            # A readiness probe.
            self.reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "length"}]})
            return
        log.write(json.dumps(body, ensure_ascii=False) + "\n")
        log.flush()
        question = last[len("Question: "):].split("\nEnd your response")[0]
        i, gold = by_question[question]
        content = VARIANTS[i % len(VARIANTS)](gold)
        self.reply(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
