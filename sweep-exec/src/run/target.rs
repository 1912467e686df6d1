//! `--target`: where a run's points go, parsed once (clap reads it through `FromStr`), so a bad
//! target fails before anything is planned and no code below the CLI matches strings.

use std::fmt;
use std::str::FromStr;

/// Where `sweep run` sends its points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// The reference engine on the virtual clock.
    #[default]
    Sim,
    /// Each point's resolved server command, started on this host.
    Local,
    /// Each point's flags served by `sweep engine serve` (the reference engine in real time).
    LocalEngine,
    /// A running OpenAI-compatible server.
    Url(String),
    /// One batch job per point on a Slurm cluster.
    Slurm,
}

impl Target {
    /// Points go to the reference engine, which simulates SGLang servers only.
    pub fn is_reference_engine(&self) -> bool {
        matches!(self, Target::Sim | Target::LocalEngine)
    }
}

/// Why a `--target` value is not one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("url: needs the server's URL, e.g. url:http://127.0.0.1:30000")]
    NoUrl,
    #[error("expected sim, local, local:engine, url:URL or slurm")]
    Unknown,
}

impl FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        match s {
            "sim" => Ok(Target::Sim),
            "local" => Ok(Target::Local),
            "local:engine" => Ok(Target::LocalEngine),
            "slurm" => Ok(Target::Slurm),
            _ => match s.strip_prefix("url:") {
                Some("") => Err(TargetError::NoUrl),
                Some(url) => Ok(Target::Url(url.to_string())),
                None => Err(TargetError::Unknown),
            },
        }
    }
}

/// The spelling `--target` takes (runs record it, Slurm jobs repeat it).
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sim => f.write_str("sim"),
            Target::Local => f.write_str("local"),
            Target::LocalEngine => f.write_str("local:engine"),
            Target::Url(u) => write!(f, "url:{u}"),
            Target::Slurm => f.write_str("slurm"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn every_target_reads_back_from_its_spelling() {
        for t in [Target::Sim, Target::Local, Target::LocalEngine, Target::Url("http://h:1/v1".into()), Target::Slurm] {
            assert_eq!(t.to_string().parse::<Target>(), Ok(t.clone()), "{t}");
        }
        assert_eq!("url:".parse::<Target>().unwrap_err().to_string(), "url: needs the server's URL, e.g. url:http://127.0.0.1:30000");
        assert!("gpu".parse::<Target>().unwrap_err().to_string().contains("expected sim, local"));
        assert!(Target::LocalEngine.is_reference_engine() && !Target::Url("x".into()).is_reference_engine());
    }
}
