//! The small requests to a server over reqwest: its model, `/server_info` (what it is, its
//! tokenizer and context length), whether it still accepts connections, and `/metrics` scrapes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::clock::Clock;
use super::{HttpError, HttpTarget, INFO_TIMEOUT};
use crate::metrics::PointContext;
use crate::prompt::{TokenText, TokenizerVocab, WordVocab};

/// SGLang's (and the reference engine's) context length in `/server_info`.
fn sglang_context(info: &Value) -> Option<u64> {
    ["context_length", "max_req_input_len"].iter().find_map(|k| info[*k].as_u64()).filter(|c| *c > 0)
}

/// A context length in vLLM's `/v1/models` (`data[0].max_model_len`) or llama.cpp's `/props`
/// (`default_generation_settings.n_ctx`, or `n_ctx`).
fn other_context(v: &Value) -> Option<u64> {
    [&v["data"][0]["max_model_len"], &v["default_generation_settings"]["n_ctx"], &v["n_ctx"]]
        .into_iter()
        .find_map(Value::as_u64)
        .filter(|c| *c > 0)
}

impl HttpTarget {
    /// Model, `/server_info` and the synthesis vocabulary of the server, into the point context:
    /// the reference engine (`sweep engine serve`) is labelled `predicted` with its profiles, any
    /// other server `measured`. Prompts are synthesized with `tokenizer` when given, else with the
    /// tokenizer the server reports when it is readable here, else (the reference engine) its
    /// built-in vocabulary, else the word list (token counts then drift from the trace's).
    /// `info_url`: where `/server_info` is asked (the worker behind a router; else `base_url`).
    pub async fn identify(&mut self, ctx: &mut PointContext, tokenizer: Option<&std::path::Path>, info_url: &str) -> Result<(), HttpError> {
        self.model = self.discover_model().await?;
        ctx.result_kind = "measured".into();
        let info = self.server_info_at(info_url).await;
        // A time-scaled reference engine: the client's clock follows its scale.
        if let Some(k) = info.as_ref().and_then(|i| i["time_scale"].as_f64()).filter(|k| *k > 0.0 && k.is_finite()) {
            self.time_scale = k;
        }
        let reported = info.as_ref().and_then(|i| i["tokenizer_path"].as_str()).map(std::path::PathBuf::from).filter(|p| p.exists());
        let engine_info = info.as_ref().and_then(|i| i.get("engine_info")).and_then(Value::as_object).cloned();
        self.context_length = match info.as_ref().and_then(sglang_context) {
            Some(c) => Some(c),
            None => self.reported_context().await,
        };
        let file = tokenizer.map(std::path::Path::to_path_buf).or(reported);
        let (vocab, vocab_name): (Arc<dyn TokenText>, String) = match (&file, &engine_info) {
            (Some(p), _) => (
                Arc::new(TokenizerVocab::from_path(p).map_err(|e| HttpError::Tokenizer { path: p.clone(), message: e.to_string() })?),
                p.display().to_string(),
            ),
            (None, Some(_)) => (Arc::new(TokenizerVocab::builtin()), "builtin (the reference engine's vocabulary)".into()),
            (None, None) => (Arc::new(WordVocab::default()), "word list (no tokenizer: pass --tokenizer for exact prompt lengths)".into()),
        };
        // Word lists are no tokenizer: outputs counted with them would not be tokens.
        self.counter = (file.is_some() || engine_info.is_some()).then(|| vocab.clone());
        self.vocab = vocab;
        ctx.profiles = match (info, engine_info) {
            // `sweep engine serve`: real HTTP, but every latency comes from the cost model.
            (Some(info), Some(mut p)) => {
                ctx.result_kind = "predicted".into();
                p.insert("engine".into(), "sweep reference engine (sweep engine serve)".into());
                p.insert("time_scale".into(), info.get("time_scale").cloned().unwrap_or(Value::Null));
                Value::Object(p)
            }
            (Some(info), None) => {
                if let Some(k) = info["result_kind"].as_str() {
                    ctx.result_kind = k.to_string();
                }
                info
            }
            (None, _) => serde_json::json!({}),
        };
        if let Some(m) = ctx.profiles.as_object_mut() {
            m.insert("synthesis_tokenizer".into(), vocab_name.into());
        }
        Ok(())
    }

    /// The context length a server other than SGLang reports: vLLM's `/v1/models`
    /// `max_model_len`, llama.cpp's `/props` `n_ctx`.
    async fn reported_context(&self) -> Option<u64> {
        for path in ["/v1/models", "/props"] {
            let Ok(r) = self.client.get(format!("{}{path}", self.base_url)).timeout(INFO_TIMEOUT).send().await else { continue };
            if !r.status().is_success() {
                continue;
            }
            if let Some(c) = r.json::<Value>().await.ok().as_ref().and_then(other_context) {
                return Some(c);
            }
        }
        None
    }

    /// The first model `/v1/models` lists.
    pub async fn discover_model(&self) -> Result<String, HttpError> {
        let url = format!("{}/v1/models", self.base_url);
        let v: Value = self
            .client
            .get(&url)
            .timeout(INFO_TIMEOUT)
            .send()
            .await
            .map_err(|source| HttpError::Info { url: url.clone(), source })?
            .json()
            .await
            .map_err(|source| HttpError::Info { url: url.clone(), source })?;
        v["data"][0]["id"].as_str().map(str::to_string).ok_or(HttpError::NoModel { url })
    }

    /// `/server_info` when the server has one (SGLang and the reference engine do).
    pub async fn server_info(&self) -> Option<Value> {
        self.server_info_at(&self.base_url).await
    }

    async fn server_info_at(&self, base: &str) -> Option<Value> {
        let r = self.client.get(format!("{}/server_info", base.trim_end_matches('/'))).timeout(INFO_TIMEOUT).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    /// Whether something still accepts TCP connections at the server's address.
    pub(super) async fn reachable(&self) -> bool {
        let Ok(u) = reqwest::Url::parse(&self.base_url) else { return true };
        let Ok(addrs) = u.socket_addrs(|| None) else { return true };
        for a in addrs {
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(a)).await {
                return true;
            }
        }
        false
    }

    /// Scrapes every `/metrics` URL once into `into`.
    pub(super) async fn scrape_once(&self, clock: &Clock, into: &std::sync::Mutex<crate::targets::scrape::Scrapes>) -> bool {
        let mut any = false;
        for base in &self.metrics_urls {
            let url = format!("{base}/metrics");
            let r = self.client.get(&url).timeout(Duration::from_secs(5)).send().await;
            let at = clock.now();
            let res = match r {
                Ok(r) if r.status().is_success() => r.text().await.map_err(|e| e.to_string()),
                Ok(r) => Err(format!("{url}: HTTP {} (an SGLang server needs --enable-metrics)", r.status().as_u16())),
                Err(e) => Err(format!("{url}: {e}")),
            };
            let mut g = into.lock().expect("scrape lock");
            match res {
                Ok(t) => {
                    g.add(at, base, &t);
                    any = true;
                }
                Err(e) => {
                    g.failures += 1;
                    g.last_error = Some(e);
                }
            }
        }
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_lengths_are_read_where_each_server_reports_them() {
        assert_eq!(sglang_context(&serde_json::json!({"context_length": 163840})), Some(163840));
        assert_eq!(sglang_context(&serde_json::json!({"max_req_input_len": 8000})), Some(8000));
        let vllm = serde_json::json!({"object": "list", "data": [{"id": "m", "max_model_len": 32768}]});
        assert_eq!(other_context(&vllm), Some(32768));
        let llama = serde_json::json!({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1});
        assert_eq!(other_context(&llama), Some(8192));
        // llama-cpp-python's /v1/models says nothing of it.
        assert_eq!(other_context(&serde_json::json!({"data": [{"id": "m", "owned_by": "me"}]})), None);
        assert_eq!(other_context(&serde_json::json!({"n_ctx": 0})), None);
    }
}
