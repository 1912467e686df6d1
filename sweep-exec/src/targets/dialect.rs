//! The request dialect of a server: which output-budget field it reads, whether it takes
//! `ignore_eos`, and extra keys it needs in every body. SGLang and vLLM read
//! `max_completion_tokens`; llama.cpp's Python server and older OpenAI-compatible servers read
//! only `max_tokens` (and without it never stop); some servers reject unknown keys.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which field carries a request's output budget.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    #[value(name = "max_tokens")]
    MaxTokens,
    #[default]
    #[value(name = "max_completion_tokens")]
    MaxCompletionTokens,
    #[value(name = "both")]
    Both,
}

/// How chat request bodies are written for one server. The default is AgentX's locked shape:
/// `stream`, `max_completion_tokens`, `ignore_eos`, `stream_options.include_usage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dialect {
    pub max_tokens_field: MaxTokensField,
    pub ignore_eos: bool,
    /// Keys merged into every body; each replaces the client's own key of that name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra_body: Map<String, Value>,
}

impl Default for Dialect {
    fn default() -> Self {
        Dialect { max_tokens_field: MaxTokensField::MaxCompletionTokens, ignore_eos: true, extra_body: Map::new() }
    }
}

/// Keys `--extra-body` cannot replace: the request would no longer be the trace's turn.
const LOCKED: [&str; 3] = ["model", "messages", "stream"];

/// Why an `--extra-body` value cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DialectError {
    #[error("--extra-body {0:?}: not a JSON object ({1}); pass e.g. '{{\"temperature\": 0}}'")]
    NotObject(String, String),
    #[error("--extra-body: key `{0}` is the replay's own (the trace's conversation, streamed); leave it out")]
    Locked(String),
    /// A recipe's `client-args` that the client's flags do not parse (clap's first line).
    #[error("the recipe's client-args: {0}")]
    ClientArgs(String),
}

/// An `--extra-body` value as the object it must be, without the replay's own keys.
fn extra_object(json: &str) -> Result<Map<String, Value>, DialectError> {
    let v: Value = serde_json::from_str(json).map_err(|e| DialectError::NotObject(json.to_string(), e.to_string()))?;
    let Value::Object(m) = v else { return Err(DialectError::NotObject(json.to_string(), "a JSON value of another kind".into())) };
    if let Some(k) = LOCKED.iter().find(|k| m.contains_key(**k)) {
        return Err(DialectError::Locked(k.to_string()));
    }
    Ok(m)
}

impl Dialect {
    /// Parses `--extra-body` (a JSON object) into the dialect's extra keys.
    pub fn set_extra_body(&mut self, json: &str) -> Result<(), DialectError> {
        self.extra_body = extra_object(json)?;
        Ok(())
    }

    /// The body after `"messages":[...]`: `,"stream":true,` the budget field(s), `ignore_eos`,
    /// `stream_options`, the extra keys, and the closing brace. `max_tokens` is the budget.
    pub fn write_tail(&self, out: &mut Vec<u8>, max_tokens: u64) {
        use std::io::Write;
        let ours = |k: &str| !self.extra_body.contains_key(k);
        out.extend_from_slice(b",\"stream\":true");
        let (legacy, current) = match self.max_tokens_field {
            MaxTokensField::MaxTokens => (true, false),
            MaxTokensField::MaxCompletionTokens => (false, true),
            MaxTokensField::Both => (true, true),
        };
        if legacy && ours("max_tokens") {
            let _ = write!(out, ",\"max_tokens\":{max_tokens}");
        }
        if current && ours("max_completion_tokens") {
            let _ = write!(out, ",\"max_completion_tokens\":{max_tokens}");
        }
        if self.ignore_eos && ours("ignore_eos") {
            out.extend_from_slice(b",\"ignore_eos\":true");
        }
        if ours("stream_options") {
            out.extend_from_slice(b",\"stream_options\":{\"include_usage\":true}");
        }
        for (k, v) in &self.extra_body {
            out.push(b',');
            let _ = serde_json::to_writer(&mut *out, k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut *out, v);
        }
        out.push(b'}');
    }

    /// A one-line description for logs and reports.
    pub fn describe(&self) -> String {
        let field = match self.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::Both => "max_tokens + max_completion_tokens",
        };
        let mut s = format!("{field}, ignore_eos {}", if self.ignore_eos { "on" } else { "off" });
        if !self.extra_body.is_empty() {
            s.push_str(&format!(", extra body {}", Value::Object(self.extra_body.clone())));
        }
        s
    }
}

/// The request-dialect flags, on `sweep replay`, `sweep run` and in a recipe's `client-args`.
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
pub struct DialectArgs {
    /// Field carrying the output budget: `max_completion_tokens` (SGLang, vLLM, OpenAI),
    /// `max_tokens` (llama.cpp's Python server, older servers) or `both` [default: max_completion_tokens].
    #[arg(long, value_enum, value_name = "FIELD")]
    pub max_tokens_field: Option<MaxTokensField>,
    /// A JSON object merged into every chat request (its keys replace the client's own; not
    /// `model`, `messages` or `stream`), e.g. '{"temperature": 0}'.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,
    /// Do not send `ignore_eos: true` (servers that reject it); outputs may then end before the
    /// trace's recorded length.
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// The server's context length in tokens, when it does not report one (`/server_info`,
    /// `/v1/models` `max_model_len`, llama.cpp `/props` `n_ctx`): traces that cannot fit are left
    /// out and a dropped stream whose prompt cannot fit is a context overflow.
    #[arg(long, value_name = "TOKENS")]
    pub context_length: Option<u64>,
}

/// A recipe's `client-args` as a command line.
#[derive(clap::Parser)]
#[command(name = "client-args", no_binary_name = true, disable_help_flag = true)]
struct ClientArgList {
    #[command(flatten)]
    d: DialectArgs,
}

impl DialectArgs {
    /// Parses a recipe's `client-args`; the error is clap's first line.
    pub fn parse_list(args: &[String]) -> Result<DialectArgs, DialectError> {
        use clap::Parser;
        ClientArgList::try_parse_from(args).map(|p| p.d).map_err(|e| {
            let text = e.to_string();
            DialectError::ClientArgs(text.lines().next().unwrap_or_default().trim_start_matches("error: ").to_string())
        })
    }

    /// These flags over `base` (a recipe's): a value given here wins; extra keys merge, these
    /// winning per key.
    pub fn over(&self, base: &DialectArgs) -> Result<DialectArgs, DialectError> {
        let extra_body = match (&base.extra_body, &self.extra_body) {
            (Some(b), Some(s)) => {
                let mut merged = extra_object(b)?;
                merged.extend(extra_object(s)?);
                Some(Value::Object(merged).to_string())
            }
            (b, s) => s.clone().or_else(|| b.clone()),
        };
        Ok(DialectArgs {
            max_tokens_field: self.max_tokens_field.or(base.max_tokens_field),
            extra_body,
            no_ignore_eos: self.no_ignore_eos || base.no_ignore_eos,
            context_length: self.context_length.or(base.context_length),
        })
    }

    pub fn dialect(&self) -> Result<Dialect, DialectError> {
        let mut d =
            Dialect { max_tokens_field: self.max_tokens_field.unwrap_or_default(), ignore_eos: !self.no_ignore_eos, ..Default::default() };
        if let Some(j) = &self.extra_body {
            d.set_extra_body(j)?;
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(d: &Dialect, n: u64) -> Value {
        let mut out = br#"{"model":"m","messages":[]"#.to_vec();
        d.write_tail(&mut out, n);
        serde_json::from_slice(&out).expect("a JSON object")
    }

    #[test]
    fn the_default_is_agentx_and_dialects_change_only_their_keys() {
        let v = tail(&Dialect::default(), 7);
        assert_eq!(
            v,
            serde_json::json!({"model":"m","messages":[],"stream":true,"max_completion_tokens":7,"ignore_eos":true,"stream_options":{"include_usage":true}})
        );
        let mut d = Dialect { max_tokens_field: MaxTokensField::MaxTokens, ignore_eos: false, ..Default::default() };
        let v = tail(&d, 9);
        assert_eq!(v["max_tokens"], 9);
        assert!(v.get("max_completion_tokens").is_none() && v.get("ignore_eos").is_none());
        d.max_tokens_field = MaxTokensField::Both;
        d.set_extra_body(r#"{"temperature":0,"stream_options":{"include_usage":false},"x":"a\"b"}"#).unwrap();
        let v = tail(&d, 3);
        assert_eq!((v["max_tokens"].as_u64(), v["max_completion_tokens"].as_u64()), (Some(3), Some(3)));
        assert_eq!(v["temperature"], 0);
        assert_eq!(v["stream_options"]["include_usage"], false, "an extra key replaces the client's own");
        assert_eq!(v["x"], "a\"b");
    }

    #[test]
    fn extra_body_must_be_an_object_without_the_replays_keys() {
        let mut d = Dialect::default();
        assert!(matches!(d.set_extra_body("[1]"), Err(DialectError::NotObject(..))));
        assert!(matches!(d.set_extra_body("{nope"), Err(DialectError::NotObject(..))));
        assert_eq!(d.set_extra_body(r#"{"messages":[]}"#), Err(DialectError::Locked("messages".into())));
        assert_eq!(d.set_extra_body(r#"{"stream":false}"#), Err(DialectError::Locked("stream".into())));
        assert!(d.extra_body.is_empty());
    }

    #[test]
    fn recipe_client_args_parse_and_the_command_line_wins() {
        let recipe =
            DialectArgs::parse_list(&["--max-tokens-field".into(), "max_tokens".into(), "--extra-body".into(), r#"{"a":1,"b":2}"#.into()])
                .unwrap();
        assert_eq!(recipe.max_tokens_field, Some(MaxTokensField::MaxTokens));
        let cli = DialectArgs { extra_body: Some(r#"{"b":3}"#.into()), no_ignore_eos: true, ..Default::default() };
        let d = cli.over(&recipe).unwrap().dialect().unwrap();
        assert_eq!(d.max_tokens_field, MaxTokensField::MaxTokens);
        assert!(!d.ignore_eos);
        assert_eq!(Value::Object(d.extra_body), serde_json::json!({"a": 1, "b": 3}));
        let e = DialectArgs::parse_list(&["--max-tokens-field".into(), "tokens".into()]).unwrap_err().to_string();
        assert!(e.starts_with("the recipe's client-args: ") && e.contains("invalid value 'tokens'"), "{e}");
        assert!(DialectArgs::parse_list(&["--tp".into(), "8".into()]).unwrap_err().to_string().contains("unexpected argument '--tp'"));
    }
}
