//! Front-end flags of `sweep engine serve`: SGLang's HTTP / tokenizer flags (read and
//! left in argv for the engine's own parser) and the few flags only this server has
//! (removed from argv).

use std::path::PathBuf;
use std::time::Duration;

use crate::tokenize::{Backend, TemplateFamily};

/// Errors in the front-end flags.
#[derive(Debug, thiserror::Error)]
pub enum ServeArgsError {
    #[error("flag {flag} needs a value")]
    MissingValue { flag: String },
    #[error("flag {flag}: invalid value {value:?}: {reason}")]
    Invalid { flag: String, value: String, reason: String },
}

/// Settings of the HTTP shell.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub host: String,
    pub port: u16,
    pub model_path: String,
    pub served_model_name: String,
    pub api_key: Option<String>,
    pub tokenizer_path: Option<PathBuf>,
    pub tokenizer_backend: Backend,
    pub tokenizer_worker_num: usize,
    /// Memo budget of the incremental chat encoder.
    pub tokenizer_cache_bytes: usize,
    pub chat_template: TemplateFamily,
    pub enable_metrics: bool,
    pub enable_cache_report: bool,
    pub stream_default_usage: bool,
    pub reasoning_parser: Option<String>,
    /// `--context-length` when given.
    pub context_length: Option<u64>,
    /// Engine time runs this many times faster than wall time.
    pub time_scale: f64,
    pub max_body_bytes: usize,
    pub seed: u64,
    /// Thinking mode when the request does not say (`SGLANG_DEFAULT_THINKING`).
    pub default_thinking: bool,
    /// Mean length of a reply that ends on its own (no `ignore_eos`): lengths are
    /// drawn from a geometric distribution with this mean, per request, seeded.
    pub mean_output_tokens: u64,
    /// Engine model profile (name or YAML); default: the one matching `--model-path`.
    pub engine_model: Option<String>,
    /// Hardware profile (name or YAML) the engine's cost model uses.
    pub hardware: String,
    /// sglang-router flags (`--router-args="--policy cache_aware --dp-aware …"`): the engine
    /// models the recipe's router in process, as on the virtual clock.
    pub router_args: Vec<String>,
    /// Emit SGLang 0.5.5's chunk shape instead of 0.5.23's (`--sglang-compat 0.5.5`).
    pub compat_055: bool,
    /// Fault injection for client tests: this fraction of chat requests is answered with
    /// HTTP 500, deterministically (request n fails when ⌊(n+1)·f⌋ > ⌊n·f⌋).
    pub fail_fraction: f64,
    /// Chat requests answered normally before `fail_fraction` applies (`--fail-after N`).
    pub fail_after: u64,
    /// A request head must arrive in full within this long (`--header-read-timeout`).
    pub header_read_timeout: Duration,
    /// A request body must arrive in full within this long after its head (`--body-read-timeout`).
    pub body_read_timeout: Duration,
    /// An idle keep-alive connection is closed after this long (`--keep-alive-timeout`).
    pub keep_alive_timeout: Duration,
    /// Open connections beyond which a new one gets 503 (`--max-connections`; default: what the
    /// open-file limit allows).
    pub max_connections: Option<usize>,
    /// On SIGTERM / SIGINT, open streams get this long to finish before they are cut
    /// (`--drain-timeout`).
    pub drain_timeout: Duration,
    pub launch_command: Vec<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 30000,
            model_path: "deepseek-ai/DeepSeek-V4-Flash".into(),
            served_model_name: "deepseek-ai/DeepSeek-V4-Flash".into(),
            api_key: None,
            tokenizer_path: None,
            tokenizer_backend: Backend::Builtin,
            tokenizer_worker_num: 1,
            tokenizer_cache_bytes: 512 << 20,
            chat_template: TemplateFamily::DeepSeekV4,
            enable_metrics: false,
            enable_cache_report: false,
            stream_default_usage: false,
            reasoning_parser: None,
            context_length: None,
            time_scale: 1.0,
            max_body_bytes: 64 << 20,
            seed: 42,
            default_thinking: false,
            mean_output_tokens: 256,
            engine_model: None,
            hardware: "h200".into(),
            router_args: Vec::new(),
            compat_055: false,
            fail_fraction: 0.0,
            fail_after: 0,
            // Slow-loris bounds: hyper's default for the head; a 64 MB body at ~1 MB/s for the body.
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(60),
            // SGLang serves through uvicorn with `timeout_keep_alive=5` (uvicorn's default too):
            // clients that pool connections see the same idle closes as against SGLang.
            keep_alive_timeout: Duration::from_secs(5),
            max_connections: None,
            drain_timeout: Duration::from_secs(10),
            launch_command: Vec::new(),
        }
    }
}

/// What a flag sets, from its value (empty for a switch).
type Set = fn(&mut ServeConfig, &mut Given, &str, &str) -> Result<(), ServeArgsError>;

/// One front-end flag, declared once: its names, whether it takes a value, whether it belongs to
/// this server only (removed from argv before the engine parses it) and what it sets.
struct Flag {
    names: &'static [&'static str],
    takes_value: bool,
    server_only: bool,
    set: Set,
}

impl Flag {
    fn named(name: &str) -> Option<&'static Flag> {
        FLAGS.iter().find(|f| f.names.contains(&name))
    }
}

/// An SGLang flag with a value: read here and left in argv for the engine.
const fn sglang(names: &'static [&'static str], set: Set) -> Flag {
    Flag { names, takes_value: true, server_only: false, set }
}
/// An SGLang switch, read here and left in argv.
const fn switch(names: &'static [&'static str], set: Set) -> Flag {
    Flag { names, takes_value: false, server_only: false, set }
}
/// A flag only this server has (a value), removed from argv.
const fn own(names: &'static [&'static str], set: Set) -> Flag {
    Flag { names, takes_value: true, server_only: true, set }
}

/// Every front-end flag. Flags not here are the engine's alone and pass through untouched.
#[expect(clippy::unit_arg, reason = "`Ok(c.field = value)`: a setter that cannot fail stays one line of the table")]
const FLAGS: &[Flag] = &[
    sglang(&["--host"], |c, _, _, v| Ok(c.host = v.into())),
    sglang(&["--port"], |c, _, f, v| Ok(c.port = v.parse().map_err(|_| invalid(f, v, "expected a port number 0-65535"))?)),
    sglang(&["--model-path", "--model"], |c, _, _, v| Ok(c.model_path = v.into())),
    sglang(&["--served-model-name"], |_, g, _, v| Ok(g.served = Some(v.to_string()))),
    sglang(&["--api-key"], |c, _, _, v| Ok(c.api_key = Some(v.into()))),
    sglang(&["--tokenizer-path"], |c, _, _, v| Ok(c.tokenizer_path = Some(PathBuf::from(v)))),
    sglang(&["--tokenizer-backend"], |c, g, f, v| {
        g.backend = true;
        c.tokenizer_backend = v.parse().map_err(|e: crate::tokenize::TokenizeError| invalid(f, v, e.to_string()))?;
        Ok(())
    }),
    sglang(&["--tokenizer-worker-num"], |c, _, f, v| {
        c.tokenizer_worker_num = v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| invalid(f, v, "expected an integer >= 1"))?;
        Ok(())
    }),
    own(&["--chat-template"], |_, g, f, v| {
        Ok(g.template = Some(v.parse().map_err(|e: crate::tokenize::TokenizeError| invalid(f, v, e.to_string()))?))
    }),
    sglang(&["--reasoning-parser"], |c, _, _, v| Ok(c.reasoning_parser = Some(v.into()))),
    sglang(&["--context-length"], |c, _, f, v| {
        c.context_length = Some(v.parse().ok().filter(|n| *n >= 2).ok_or_else(|| invalid(f, v, "expected an integer >= 2"))?);
        Ok(())
    }),
    sglang(&["--random-seed"], |c, _, f, v| Ok(c.seed = v.parse().map_err(|_| invalid(f, v, "expected an unsigned integer"))?)),
    switch(&["--enable-metrics"], |c, _, _, _| Ok(c.enable_metrics = true)),
    switch(&["--enable-cache-report"], |c, _, _, _| Ok(c.enable_cache_report = true)),
    switch(&["--stream-response-default-include-usage"], |c, _, _, _| Ok(c.stream_default_usage = true)),
    own(&["--engine-model"], |c, _, _, v| Ok(c.engine_model = Some(v.into()))),
    own(&["--hardware"], |c, _, _, v| Ok(c.hardware = v.into())),
    // Router flags contain no quoted values; whitespace separates them.
    own(&["--router-args"], |c, _, _, v| Ok(c.router_args = v.split_whitespace().map(str::to_string).collect())),
    own(&["--sglang-compat"], |c, _, f, v| {
        c.compat_055 = match v {
            "0.5.5" => true,
            "0.5.23" => false,
            _ => return Err(invalid(f, v, "expected 0.5.23 (default) or 0.5.5")),
        };
        Ok(())
    }),
    own(&["--time-scale"], |c, _, f, v| Ok(c.time_scale = positive(f, v, "must be > 0 (1 = real time)")?)),
    own(&["--fail-fraction"], |c, _, f, v| {
        let x = number(f, v)?;
        if !(0.0..=1.0).contains(&x) {
            return Err(invalid(f, v, "expected a fraction 0-1 of requests to fail with HTTP 500"));
        }
        c.fail_fraction = x;
        Ok(())
    }),
    own(&["--fail-after"], |c, _, f, v| Ok(c.fail_after = v.parse().map_err(|_| invalid(f, v, "expected a request count"))?)),
    own(&["--tokenizer-cache-mb"], |c, _, f, v| Ok(c.tokenizer_cache_bytes = (number(f, v)?.max(0.0) * 1048576.0) as usize)),
    own(&["--max-request-body-mb"], |c, _, f, v| Ok(c.max_body_bytes = (positive(f, v, "must be > 0")? * 1048576.0) as usize)),
    own(&["--mean-output-tokens"], |c, _, f, v| {
        c.mean_output_tokens = v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| invalid(f, v, "expected an integer >= 1"))?;
        Ok(())
    }),
    own(&["--header-read-timeout"], |c, _, f, v| Ok(c.header_read_timeout = seconds(f, v)?)),
    own(&["--body-read-timeout"], |c, _, f, v| Ok(c.body_read_timeout = seconds(f, v)?)),
    own(&["--keep-alive-timeout"], |c, g, f, v| {
        g.keep_alive = true;
        c.keep_alive_timeout = seconds(f, v)?;
        Ok(())
    }),
    own(&["--drain-timeout"], |c, _, f, v| Ok(c.drain_timeout = seconds(f, v)?)),
    own(&["--max-connections"], |c, _, f, v| {
        c.max_connections = Some(v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| invalid(f, v, "expected a connection count >= 1"))?);
        Ok(())
    }),
];

fn split(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f, Some(v)),
        _ => (arg, None),
    }
}

fn invalid(flag: &str, value: &str, reason: impl Into<String>) -> ServeArgsError {
    ServeArgsError::Invalid { flag: flag.into(), value: value.into(), reason: reason.into() }
}

fn number(flag: &str, v: &str) -> Result<f64, ServeArgsError> {
    v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| invalid(flag, v, "expected a number"))
}

/// A number > 0, or the error `why`.
fn positive(flag: &str, v: &str, why: &str) -> Result<f64, ServeArgsError> {
    Some(number(flag, v)?).filter(|x| *x > 0.0).ok_or_else(|| invalid(flag, v, why))
}

/// Seconds > 0 (fractions allowed, so tests can use short timeouts).
fn seconds(flag: &str, v: &str) -> Result<Duration, ServeArgsError> {
    let x = number(flag, v)?;
    if x <= 0.0 || x > 1e9 {
        return Err(invalid(flag, v, "expected seconds > 0"));
    }
    Ok(Duration::from_secs_f64(x))
}

/// Flags whose effect depends on others, settled once all are read.
#[derive(Default)]
struct Given {
    served: Option<String>,
    template: Option<TemplateFamily>,
    backend: bool,
    keep_alive: bool,
}

impl ServeConfig {
    /// Reads the front-end flags from SGLang-style argv and `SGLANG_*` variables;
    /// returns the config and argv without the server-only flags.
    pub fn from_argv(argv: &[String], env: impl Fn(&str) -> Option<String>) -> Result<(ServeConfig, Vec<String>), ServeArgsError> {
        let mut c = ServeConfig { launch_command: argv.to_vec(), ..ServeConfig::default() };
        let mut rest = Vec::new();
        let mut given = Given::default();
        let mut i = 0;
        while i < argv.len() {
            let (flag, inline) = split(&argv[i]);
            let known = Flag::named(flag);
            let takes_value = known.is_some_and(|f| f.takes_value);
            let value = match inline {
                Some(v) if takes_value => Some(v.to_string()),
                None if takes_value => {
                    let v = argv.get(i + 1).filter(|v| !v.starts_with("--")).cloned();
                    Some(v.ok_or_else(|| ServeArgsError::MissingValue { flag: flag.into() })?)
                }
                _ => None,
            };
            let consumed = if takes_value && inline.is_none() { 2 } else { 1 };
            if let Some(f) = known {
                (f.set)(&mut c, &mut given, flag, value.as_deref().unwrap_or(""))?;
            }
            if !known.is_some_and(|f| f.server_only) {
                rest.extend_from_slice(&argv[i..i + consumed]);
            }
            i += consumed;
        }
        c.settle(given, env)?;
        Ok((c, rest))
    }

    /// Defaults that depend on other flags, and the environment.
    fn settle(&mut self, given: Given, env: impl Fn(&str) -> Option<String>) -> Result<(), ServeArgsError> {
        self.served_model_name = given.served.unwrap_or_else(|| self.model_path.clone());
        self.chat_template = given.template.unwrap_or_else(|| TemplateFamily::for_model(&self.model_path));
        // SGLang's default backend is huggingface, but only with a tokenizer file; with
        // no file the built-in vocabulary is the only choice.
        if self.tokenizer_path.is_none() {
            self.tokenizer_backend = Backend::Builtin;
        } else if !given.backend {
            self.tokenizer_backend = Backend::HuggingFace;
        }
        self.default_thinking =
            env("SGLANG_DEFAULT_THINKING").map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")).unwrap_or(false);
        // SGLang hands `SGLANG_TIMEOUT_KEEP_ALIVE` to uvicorn as its keep-alive timeout. Recipes
        // raise it (900–1800 s) so that a pooling client or router never reuses a connection the
        // server is closing: that race fails a request, and a failed warmup ends the run.
        if !given.keep_alive
            && let Some(v) = env("SGLANG_TIMEOUT_KEEP_ALIVE").filter(|v| !v.trim().is_empty())
        {
            self.keep_alive_timeout = seconds("SGLANG_TIMEOUT_KEEP_ALIVE", v.trim())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_front_end_flags_and_strips_server_only_ones() {
        let (c, rest) = ServeConfig::from_argv(
            &argv(
                "--model-path deepseek-ai/DeepSeek-V4.1-Flash --tp 4 --port=8123 --api-key k \
                 --tokenizer-path /t/tokenizer.json --tokenizer-backend fastokens --time-scale 10 \
                 --enable-metrics --tokenizer-worker-num 4",
            ),
            |_| Some("1".into()),
        )
        .unwrap();
        assert_eq!(c.port, 8123);
        assert_eq!(c.served_model_name, "deepseek-ai/DeepSeek-V4.1-Flash");
        assert_eq!(c.tokenizer_backend, Backend::Fastokens);
        assert_eq!(c.time_scale, 10.0);
        assert_eq!(c.tokenizer_worker_num, 4);
        assert!(c.enable_metrics && c.default_thinking);
        assert_eq!(c.chat_template, TemplateFamily::DeepSeekV4);
        assert!(!rest.iter().any(|a| a.contains("time-scale")));
        assert!(rest.contains(&"--tp".to_string()) && rest.contains(&"--api-key".to_string()));
    }

    #[test]
    fn bad_values_name_the_flag() {
        let e = ServeConfig::from_argv(&argv("--time-scale 0"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--time-scale"), "{e}");
        let e = ServeConfig::from_argv(&argv("--port"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--port needs a value"), "{e}");
        let e = ServeConfig::from_argv(&argv("--fail-fraction 1.5"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--fail-fraction"), "{e}");
        let (c, rest) = ServeConfig::from_argv(&argv("--fail-fraction 0.25 --tp 4"), |_| None).unwrap();
        assert_eq!((c.fail_fraction, rest.len()), (0.25, 2));
        let e = ServeConfig::from_argv(&argv("--tokenizer-backend sp"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--tokenizer-backend"), "{e}");
        let e = ServeConfig::from_argv(&argv("--keep-alive-timeout 0"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--keep-alive-timeout"), "{e}");
        let e = ServeConfig::from_argv(&argv("--max-connections 0"), |_| None).unwrap_err();
        assert!(e.to_string().contains("--max-connections"), "{e}");
    }

    #[test]
    fn connection_flags_are_server_only() {
        let (c, rest) = ServeConfig::from_argv(
            &argv(
                "--header-read-timeout 0.5 --body-read-timeout=2 --keep-alive-timeout 1.5 --max-connections 8 \
                 --drain-timeout 3 --tp 4",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(c.header_read_timeout, Duration::from_millis(500));
        assert_eq!(c.body_read_timeout, Duration::from_secs(2));
        assert_eq!(c.keep_alive_timeout, Duration::from_millis(1500));
        assert_eq!(c.max_connections, Some(8));
        assert_eq!(c.drain_timeout, Duration::from_secs(3));
        assert_eq!(rest, argv("--tp 4"));
        let (d, _) = ServeConfig::from_argv(&[], |_| None).unwrap();
        assert_eq!((d.keep_alive_timeout, d.drain_timeout, d.max_connections), (Duration::from_secs(5), Duration::from_secs(10), None));
    }

    #[test]
    fn sglang_timeout_keep_alive_sets_the_keep_alive_unless_the_flag_does() {
        let env = |v: &'static str| move |k: &str| (k == "SGLANG_TIMEOUT_KEEP_ALIVE").then(|| v.to_string());
        let (c, _) = ServeConfig::from_argv(&[], env("900")).unwrap();
        assert_eq!(c.keep_alive_timeout, Duration::from_secs(900));
        let (c, _) = ServeConfig::from_argv(&argv("--keep-alive-timeout 2"), env("900")).unwrap();
        assert_eq!(c.keep_alive_timeout, Duration::from_secs(2));
        let e = ServeConfig::from_argv(&[], env("forever")).unwrap_err().to_string();
        assert!(e.contains("SGLANG_TIMEOUT_KEEP_ALIVE") && e.contains("forever"), "{e}");
    }

    #[test]
    fn backend_defaults() {
        let (c, _) = ServeConfig::from_argv(&argv("--tokenizer-backend fastokens"), |_| None).unwrap();
        assert_eq!(c.tokenizer_backend, Backend::Builtin);
        let (c, _) = ServeConfig::from_argv(&argv("--tokenizer-path /x"), |_| None).unwrap();
        assert_eq!(c.tokenizer_backend, Backend::HuggingFace);
    }
}
