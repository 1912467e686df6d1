//! The small requests to a server over reqwest: its model, `/server_info` (what it is, its
//! tokenizer and context length), whether it still accepts connections, and `/metrics` scrapes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::clock::Clock;
use super::{HttpError, HttpTarget, INFO_TIMEOUT};
use crate::metrics::PointContext;
use crate::prompt::{TokenText, TokenizerVocab, WordVocab};

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
        self.context_length =
            info.as_ref().and_then(|i| ["context_length", "max_req_input_len"].iter().find_map(|k| i[*k].as_u64()).filter(|c| *c > 0));
        let file = tokenizer.map(std::path::Path::to_path_buf).or(reported);
        let (vocab, vocab_name): (Arc<dyn TokenText>, String) = match (&file, &engine_info) {
            (Some(p), _) => (
                Arc::new(TokenizerVocab::from_path(p).map_err(|message| HttpError::Tokenizer { path: p.clone(), message })?),
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
