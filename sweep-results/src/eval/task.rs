//! The gsm8k task as InferenceX runs it (`utils/evals/gsm8k.yaml` through `run_lm_eval.sh`, i.e.
//! lm-eval's `local-chat-completions` with `--apply_chat_template`): the patched prompt, 5-shot
//! from the train split as separate chat turns (`fewshot_as_multiturn`, on with the chat
//! template), the sampler lm-eval seeds with 1234, and the request body it sends.

use super::data::{Doc, Gsm8k};
use super::pyrandom::PyRandom;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Few-shot examples per question (`num_fewshot: 5`).
pub const NUM_FEWSHOT: usize = 5;
/// lm-eval's `fewshot_random_seed` default (`DEFAULT_OTHER_SEED`).
pub const FEWSHOT_SEED: u64 = 1234;
/// The task's `until`, sent as `stop` (lm-eval appends `eos_string=</s>`, already there).
pub const STOP: [&str; 2] = ["</s>", "<|im_end|>"];
/// The `seed` lm-eval's API models put in every body.
pub const REQUEST_SEED: u64 = 1234;
/// `EVAL_MAX_MODEL_LEN`'s default in `run_lm_eval.sh`.
pub const DEFAULT_MAX_MODEL_LEN: u64 = 16384;
/// `EVAL_CONCURRENT_REQUESTS`'s default (`num_concurrent`).
pub const DEFAULT_CONCURRENCY: usize = 64;
/// `max_retries=5` in `run_lm_eval.sh`: attempts per request, the first included.
pub const MAX_ATTEMPTS: u32 = 5;
/// `timeout=1800` in `run_lm_eval.sh`: seconds one attempt may take.
pub const REQUEST_TIMEOUT_S: u64 = 1800;
/// The task's `metadata.version`.
pub const TASK_VERSION: f64 = 3.0;
pub const TASK: &str = "gsm8k";

/// `run_lm_eval.sh`'s output budget: the context less 4096 (half of it for a context of 4096 or
/// less), at most 16384.
pub fn max_output_tokens(max_model_len: u64) -> u64 {
    let t = if max_model_len > 4096 { max_model_len - 4096 } else { max_model_len / 2 };
    t.min(16384)
}

/// The patched `doc_to_text`: the question and the instruction to end with `#### [number]`.
pub fn doc_to_text(question: &str) -> String {
    format!("Question: {question}\nEnd your response with the answer on the last line, formatted as: #### [number]\nAnswer:")
}

/// One chat message of a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message<'a> {
    pub role: &'static str,
    pub content: std::borrow::Cow<'a, str>,
}

/// One test question and the train rows shown before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub doc_id: usize,
    pub fewshot: [usize; NUM_FEWSHOT],
}

impl Prompt {
    /// The chat turns: each example's question as `user` and its worked answer as `assistant`,
    /// then the test question (no system message: the task has no description).
    pub fn messages<'a>(&self, data: &'a Gsm8k) -> Vec<Message<'a>> {
        let mut m = Vec::with_capacity(2 * NUM_FEWSHOT + 1);
        for &i in &self.fewshot {
            let d = &data.train[i];
            m.push(Message { role: "user", content: doc_to_text(&d.question).into() });
            m.push(Message { role: "assistant", content: d.answer.as_str().into() });
        }
        m.push(Message { role: "user", content: doc_to_text(&data.test[self.doc_id].question).into() });
        m
    }
}

/// The prompts of the first `n` test questions. lm-eval draws every question's examples from
/// one generator, question after question, so a limited run shows the same examples as the
/// same questions of a full run.
pub fn prompts(data: &Gsm8k, n: usize) -> Vec<Prompt> {
    let mut rng = PyRandom::new(FEWSHOT_SEED);
    (0..n.min(data.test.len()))
        .map(|doc_id| {
            let picked = rng.sample_indices(data.train.len(), NUM_FEWSHOT);
            Prompt { doc_id, fewshot: picked.try_into().expect("NUM_FEWSHOT picks") }
        })
        .collect()
}

/// A string as Python's `json.dumps(..., ensure_ascii=False)` writes it.
fn py_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The messages as lm-eval serializes them for an API model (`json.dumps(chat,
/// ensure_ascii=False)`): the text its `prompt_hash` is taken of.
pub fn python_json(messages: &[Message]) -> String {
    let mut o = String::from("[");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            o.push_str(", ");
        }
        o.push_str("{\"role\": ");
        py_json_str(&mut o, m.role);
        o.push_str(", \"content\": ");
        py_json_str(&mut o, &m.content);
        o.push('}');
    }
    o.push(']');
    o
}

pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// lm-eval's `prompt_hash` of a sample.
pub fn prompt_hash(messages: &[Message]) -> String {
    sha256_hex(&python_json(messages))
}

/// lm-eval's `doc_hash` (the doc as `json.dumps(doc, indent=2, ensure_ascii=False)`).
pub fn doc_hash(doc: &Doc) -> String {
    let mut s = String::from("{\n  \"question\": ");
    py_json_str(&mut s, &doc.question);
    s.push_str(",\n  \"answer\": ");
    py_json_str(&mut s, &doc.answer);
    s.push_str("\n}");
    sha256_hex(&s)
}

/// lm-eval's `target_hash` (the target is the whole worked answer).
pub fn target_hash(doc: &Doc) -> String {
    sha256_hex(&doc.answer)
}

/// The chat-completions body lm-eval's `LocalChatCompletion` sends, keys in its order: greedy,
/// not streamed, the task's stop strings, its seed, `top_p` 1 from `--gen_kwargs`.
#[derive(Serialize)]
struct Body<'a> {
    messages: &'a [Message<'a>],
    model: &'a str,
    max_tokens: u64,
    temperature: u32,
    stop: [&'static str; 2],
    seed: u64,
    top_p: u32,
}

pub fn request_body(model: &str, messages: &[Message], max_tokens: u64) -> Vec<u8> {
    serde_json::to_vec(&Body { messages, model, max_tokens, temperature: 0, stop: STOP, seed: REQUEST_SEED, top_p: 1 })
        .expect("a request body serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::data;

    #[test]
    fn the_output_budget_follows_run_lm_eval() {
        assert_eq!(max_output_tokens(16384), 12288);
        assert_eq!(max_output_tokens(4096), 2048);
        assert_eq!(max_output_tokens(4097), 1);
        assert_eq!(max_output_tokens(1_000_000), 16384);
        assert_eq!(max_output_tokens(256), 128);
    }

    /// Checked against lm-eval 0.4.13 running InferenceX's gsm8k.yaml over the same splits
    /// (`--apply_chat_template --log_samples`): the five train rows shown before a question,
    /// and the `prompt_hash`, `doc_hash` and `target_hash` of its samples file. `ALL` is the
    /// SHA-256 of the 1,319 prompt hashes in doc order.
    #[test]
    fn prompts_are_lm_evals_byte_for_byte() {
        let d = data::embedded();
        let p = prompts(&d, data::TEST_ROWS);
        assert_eq!(p.len(), 1319);
        assert_eq!(p[0].fewshot, [6374, 3610, 957, 61, 742]);
        assert_eq!(p[1].fewshot, [7462, 6610, 4769, 286, 5501]);
        assert_eq!(p[2].fewshot, [5677, 687, 806, 6279, 2905]);
        assert_eq!(p[1318].fewshot, [220, 4179, 6064, 5599, 5541]);
        let m0 = p[0].messages(&d);
        assert_eq!(m0.len(), 11);
        assert_eq!(prompt_hash(&m0), "880e5df301f84a9712e6225a7d85c57a0d9f18d9dda47182fb63896631042aa2");
        assert_eq!(doc_hash(&d.test[0]), "986c19252f3c7f6eaeff2229e9a5777f96a85c0ceea931a92d2289084dfd518c");
        assert_eq!(target_hash(&d.test[0]), "623a0fbdf774fcb55e485a3e6b012e6c3965616af5b8eb9b9aebd2f6712be2eb");
        assert_eq!(prompt_hash(&p[1318].messages(&d)), "fc385e25c66495c08d9abbf2994b3d0cb0daa3058a366b01f71639095ec559e4");
        let all: String = p.iter().map(|x| prompt_hash(&x.messages(&d))).collect();
        assert_eq!(sha256_hex(&all), "871c6846ed18a260242fe129dff6afbc56092a1ab31044031b504192fd569c9b");
        // A limited run asks the same first questions with the same examples.
        assert_eq!(prompts(&d, 50)[..], p[..50]);
    }

    #[test]
    fn the_body_is_local_chat_completions() {
        let m = [Message { role: "user", content: "Question: 1+1?".into() }];
        let b: serde_json::Value = serde_json::from_slice(&request_body("m", &m, 12288)).unwrap();
        assert_eq!(
            b,
            serde_json::json!({"messages": [{"role": "user", "content": "Question: 1+1?"}], "model": "m", "max_tokens": 12288,
                "temperature": 0, "stop": ["</s>", "<|im_end|>"], "seed": 1234, "top_p": 1})
        );
    }

    #[test]
    fn python_json_escapes_as_python_does() {
        let m = [Message { role: "user", content: "a\"b\\c\nd\te\u{1}f\u{7f}é’".into() }];
        assert_eq!(python_json(&m), "[{\"role\": \"user\", \"content\": \"a\\\"b\\\\c\\nd\\te\\u0001f\u{7f}é’\"}]");
    }
}
