//! Reading profiles: the embedded YAML files, files on disk, and lookup by name or alias.

use super::hardware::GpuSpec;
use super::model::ModelSpec;
use serde::Deserialize;
use std::path::Path;

/// A profile could not be read or found.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid profile {path}: {message}")]
    Parse { path: String, message: String },
    #[error("unknown {kind} profile '{name}'; known: {known}")]
    Unknown { kind: &'static str, name: String, known: String },
    #[error("invalid profile {path}: {message}")]
    Invalid { path: String, message: String },
}

const EMBEDDED_MODELS: &[(&str, &str)] = &[
    ("profiles/models/deepseek-v4-flash.yaml", include_str!("../../profiles/models/deepseek-v4-flash.yaml")),
    ("profiles/models/deepseek-v4.1-flash.yaml", include_str!("../../profiles/models/deepseek-v4.1-flash.yaml")),
    ("profiles/models/deepseek-v3.yaml", include_str!("../../profiles/models/deepseek-v3.yaml")),
    ("profiles/models/llama-3.1-8b.yaml", include_str!("../../profiles/models/llama-3.1-8b.yaml")),
];

const EMBEDDED_HARDWARE: &[(&str, &str)] = &[
    ("profiles/hardware/h200.yaml", include_str!("../../profiles/hardware/h200.yaml")),
    ("profiles/hardware/h200-measured.yaml", include_str!("../../profiles/hardware/h200-measured.yaml")),
    ("profiles/hardware/h200-fitted.yaml", include_str!("../../profiles/hardware/h200-fitted.yaml")),
    ("profiles/hardware/b200.yaml", include_str!("../../profiles/hardware/b200.yaml")),
    ("profiles/hardware/b200-fitted.yaml", include_str!("../../profiles/hardware/b200-fitted.yaml")),
    ("profiles/hardware/h100.yaml", include_str!("../../profiles/hardware/h100.yaml")),
    ("profiles/hardware/h100-from-h200-fitted.yaml", include_str!("../../profiles/hardware/h100-from-h200-fitted.yaml")),
    ("profiles/hardware/b300.yaml", include_str!("../../profiles/hardware/b300.yaml")),
    ("profiles/hardware/b300-from-b200-fitted.yaml", include_str!("../../profiles/hardware/b300-from-b200-fitted.yaml")),
    ("profiles/hardware/gb200.yaml", include_str!("../../profiles/hardware/gb200.yaml")),
    ("profiles/hardware/gb200-from-b200-fitted.yaml", include_str!("../../profiles/hardware/gb200-from-b200-fitted.yaml")),
    ("profiles/hardware/gb300.yaml", include_str!("../../profiles/hardware/gb300.yaml")),
    ("profiles/hardware/gb300-from-b200-fitted.yaml", include_str!("../../profiles/hardware/gb300-from-b200-fitted.yaml")),
    ("profiles/hardware/gb300-fitted-dsv41flash.yaml", include_str!("../../profiles/hardware/gb300-fitted-dsv41flash.yaml")),
];

fn parse_yaml<T: for<'de> Deserialize<'de>>(path: &str, text: &str) -> Result<T, ProfileError> {
    crate::yaml_limits::check(text).map_err(|e| ProfileError::Parse {
        path: path.to_string(),
        message: match e.line() {
            Some(l) => format!("line {l}: {e}; {}", e.fix()),
            None => format!("{e}; {}", e.fix()),
        },
    })?;
    serde_yaml_ng::from_str(text).map_err(|e| ProfileError::Parse {
        path: path.to_string(),
        message: match e.location() {
            Some(l) => format!("line {} column {}: {}", l.line(), l.column(), crate::args::excerpt_quoted(&e.to_string())),
            None => crate::args::excerpt_quoted(&e.to_string()),
        },
    })
}

/// A profile file's text, bounded by the YAML size limit.
fn read_text(path: &Path) -> Result<String, ProfileError> {
    let p = path.display().to_string();
    let bytes = crate::yaml_limits::read(path).map_err(|e| match e {
        crate::yaml_limits::ReadError::Io(source) => ProfileError::Io { path: p.clone(), source },
        crate::yaml_limits::ReadError::Limit(l) => ProfileError::Parse { path: p.clone(), message: format!("{l}; {}", l.fix()) },
    })?;
    String::from_utf8(bytes).map_err(|e| ProfileError::Parse { path: p, message: format!("not UTF-8 text: {e}") })
}

fn norm(s: &str) -> String {
    s.to_ascii_lowercase().replace('_', "-")
}

impl ModelSpec {
    /// Parses one model profile (the path is only used in error messages).
    pub fn from_yaml(path: &str, text: &str) -> Result<ModelSpec, ProfileError> {
        let m: ModelSpec = parse_yaml(path, text)?;
        m.validate(path)?;
        Ok(m)
    }

    pub fn from_file(path: &Path) -> Result<ModelSpec, ProfileError> {
        let p = path.display().to_string();
        let text = read_text(path)?;
        ModelSpec::from_yaml(&p, &text)
    }

    fn validate(&self, path: &str) -> Result<(), ProfileError> {
        let bad = |message: String| ProfileError::Invalid { path: path.to_string(), message };
        if self.layers == 0 || self.hidden_size == 0 {
            return Err(bad("layers and hidden_size must be > 0".into()));
        }
        if self.moe_layers > self.layers {
            return Err(bad(format!("moe_layers ({}) exceeds layers ({})", self.moe_layers, self.layers)));
        }
        if self.moe_layers > 0 && self.experts.is_none() {
            return Err(bad("moe_layers > 0 needs an `experts` section".into()));
        }
        if let Some(e) = &self.experts
            && (e.top_k == 0 || e.top_k > e.routed)
        {
            return Err(bad(format!("experts.top_k must be in 1..={} (got {})", e.routed, e.top_k)));
        }
        if self.sglang_defaults.page_size == 0 {
            return Err(bad("sglang_defaults.page_size must be > 0".into()));
        }
        Ok(())
    }

    /// All embedded model profiles.
    pub fn builtin() -> Vec<ModelSpec> {
        EMBEDDED_MODELS.iter().map(|(p, t)| ModelSpec::from_yaml(p, t).expect("embedded profile is valid")).collect()
    }

    /// Finds a profile by name, alias or HF path (case-insensitive); a path ending
    /// in `.yaml`/`.yml` is read from disk.
    pub fn lookup(name: &str) -> Result<ModelSpec, ProfileError> {
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            return ModelSpec::from_file(Path::new(name));
        }
        let n = norm(name);
        let all = ModelSpec::builtin();
        let hit = all.iter().find(|m| {
            norm(&m.name) == n
                || m.aliases.iter().any(|a| norm(a) == n)
                // "org/Model" given, alias without org, or the reverse
                || m.aliases.iter().any(|a| norm(a.rsplit('/').next().unwrap_or(a)) == norm(n.rsplit('/').next().unwrap_or(&n)))
        });
        hit.cloned().ok_or_else(|| ProfileError::Unknown {
            kind: "model",
            name: name.to_string(),
            known: all.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}

impl GpuSpec {
    pub fn from_yaml(path: &str, text: &str) -> Result<GpuSpec, ProfileError> {
        let g: GpuSpec = parse_yaml(path, text)?;
        let c = &g.cost;
        if !(c.eta_bw > 0.0 && c.eta_bw <= 1.0 && c.eta_flops > 0.0 && c.eta_flops <= 1.0) {
            return Err(ProfileError::Invalid {
                path: path.to_string(),
                message: "cost.eta_bw and cost.eta_flops must be in (0, 1]".into(),
            });
        }
        if g.datasheet.memory_bytes <= 0.0 || g.datasheet.hbm_bandwidth <= 0.0 {
            return Err(ProfileError::Invalid {
                path: path.to_string(),
                message: "datasheet.memory_bytes and hbm_bandwidth must be > 0".into(),
            });
        }
        if let Some(message) = g.power.as_ref().and_then(super::PowerModel::problem) {
            return Err(ProfileError::Invalid { path: path.to_string(), message });
        }
        Ok(g)
    }

    pub fn from_file(path: &Path) -> Result<GpuSpec, ProfileError> {
        let p = path.display().to_string();
        let text = read_text(path)?;
        GpuSpec::from_yaml(&p, &text)
    }

    pub fn builtin() -> Vec<GpuSpec> {
        EMBEDDED_HARDWARE.iter().map(|(p, t)| GpuSpec::from_yaml(p, t).expect("embedded profile is valid")).collect()
    }

    pub fn lookup(name: &str) -> Result<GpuSpec, ProfileError> {
        if name.ends_with(".yaml") || name.ends_with(".yml") {
            return GpuSpec::from_file(Path::new(name));
        }
        let n = norm(name);
        let all = GpuSpec::builtin();
        all.iter().find(|g| norm(&g.name) == n || g.aliases.iter().any(|a| norm(a) == n)).cloned().ok_or_else(|| ProfileError::Unknown {
            kind: "hardware",
            name: name.to_string(),
            known: all.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}
