//! Golden acceptance-length curves (InferenceX `golden_al_distribution/*.yaml`, spec
//! `inferencex.md` §6) and their rendering into engine settings for simulated acceptance.

use crate::problem::{Problem, Problems};
use crate::yaml::{self, Doc, YPath, type_name};
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One model's curve: per thinking mode (None when the file has no `thinking*` level), K → AL.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Curve {
    pub modes: BTreeMap<Option<String>, BTreeMap<u32, f64>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GoldenFile {
    pub path: PathBuf,
    /// File stem, e.g. `dsv41flash_dspark`; its method part disambiguates files of one slug.
    pub stem: String,
    pub curves: BTreeMap<String, Curve>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct GoldenAl {
    pub files: Vec<GoldenFile>,
}

/// A resolved golden value and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Golden {
    pub al: f64,
    pub slug: String,
    pub mode: Option<String>,
    pub k: u32,
    pub file: PathBuf,
}

/// Why a golden AL lookup found no value: the models, files, modes or K that exist instead.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GoldenError {
    #[error("no golden AL curve for model `{slug}` (model-prefix `{prefix}`); known models: {}", .known.join(", "))]
    UnknownModel { slug: String, prefix: String, known: Vec<String> },
    #[error("model `{slug}` has several golden AL files ({}); name the speculative method to choose one", joined_paths(.files))]
    Ambiguous { slug: String, files: Vec<PathBuf> },
    #[error("{}: model `{slug}` has no `{mode}` curve (has: {})", .file.display(), .modes.join(", "))]
    NoMode { file: PathBuf, slug: String, mode: String, modes: Vec<String> },
    #[error(
        "{}: model `{slug}`{} has no golden AL for {k} speculative tokens (has K = {})",
        .file.display(),
        mode_suffix(.mode),
        .have.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    )]
    NoK { file: PathBuf, slug: String, mode: Option<String>, k: u32, have: Vec<u32> },
}

/// Paths as `a, b, c`.
fn joined_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// ` thinking_on` after the model's name, when the curve has modes.
fn mode_suffix(mode: &Option<String>) -> String {
    mode.as_ref().map(|m| format!(" {m}")).unwrap_or_default()
}

/// Model prefix → golden slug (InferenceX's map, plus sweep's own models).
pub fn slug_for_prefix(prefix: &str) -> &str {
    match prefix {
        "dsv4" => "deepseek-v4-pro",
        "dsr1" => "deepseek-r1",
        "dsv4dspark" | "dsv4dsparkprob" => "deepseek-v4-pro-0813",
        "dsv41flash" => "deepseek-v4.1-flash",
        // The slugs of the other published curves (spec §6.2 file table).
        "kimik3" => "kimi-k3",
        "kimik2.5" => "kimi-k2.5-nvfp4",
        "minimaxm3" => "minimax-m3",
        "glm5.2" => "glm-5.2-fp8",
        "qwen3.5" => "qwen3.5-397b-a17b-nvfp4",
        other => other,
    }
}

impl GoldenAl {
    /// Loads every `*.yaml` in `dir` (sorted by name).
    pub fn load_dir(dir: &Path) -> Result<GoldenAl, Problems> {
        let rd = std::fs::read_dir(dir).map_err(|e| Problems::io(dir, &e))?;
        let mut paths: Vec<PathBuf> =
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml")).collect();
        paths.sort();
        let mut problems = Problems::default();
        let docs: Vec<Doc> = paths.iter().filter_map(|p| problems.take(yaml::load(p))).collect();
        let out = problems.take(Self::from_docs(&docs));
        match out {
            Some(g) => problems.into_result(g),
            None => Err(problems),
        }
    }

    /// The curves of parsed golden AL files (in the order given).
    pub fn from_docs(docs: &[Doc]) -> Result<GoldenAl, Problems> {
        let mut problems = Problems::default();
        let mut out = GoldenAl::default();
        for doc in docs {
            if let Some(f) = problems.take(parse_file(doc)) {
                out.files.push(f);
            }
        }
        problems.into_result(out)
    }

    /// Looks up the golden AL for (model prefix, thinking mode, K). `method` (e.g. `dspark`,
    /// `mtp`, `eagle3`) picks among several files for one slug.
    pub fn lookup(&self, prefix: &str, thinking: Option<&str>, k: u32, method: Option<&str>) -> Result<Golden, GoldenError> {
        // A mapped prefix, or the slug itself.
        let mapped = slug_for_prefix(prefix);
        let slug = if self.files.iter().any(|f| f.curves.contains_key(mapped)) { mapped } else { prefix };
        let mut cands: Vec<&GoldenFile> = self.files.iter().filter(|f| f.curves.contains_key(slug)).collect();
        if cands.is_empty() {
            let known: Vec<String> = self.files.iter().flat_map(|f| f.curves.keys().cloned()).collect();
            return Err(GoldenError::UnknownModel { slug: slug.to_string(), prefix: prefix.to_string(), known });
        }
        if cands.len() > 1
            && let Some(m) = method
        {
            let m = m.to_ascii_lowercase();
            let hit: Vec<&GoldenFile> = cands.iter().copied().filter(|f| f.stem.to_ascii_lowercase().contains(&m)).collect();
            if !hit.is_empty() {
                cands = hit;
            }
        }
        if cands.len() > 1 {
            // The plain `<model>_<method>` file is the default curve; variants carry longer names.
            cands.sort_by_key(|f| f.stem.len());
            if cands[0].stem.len() == cands[1].stem.len() {
                let files: Vec<PathBuf> = cands.iter().map(|f| f.path.clone()).collect();
                return Err(GoldenError::Ambiguous { slug: slug.to_string(), files });
            }
        }
        let f = cands[0];
        let curve = &f.curves[slug];
        let has_modes = curve.modes.keys().any(|k| k.is_some());
        let mode = if has_modes { Some(thinking.unwrap_or("thinking_on").to_string()) } else { None };
        let Some(ks) = curve.modes.get(&mode) else {
            let modes: Vec<String> = curve.modes.keys().flatten().cloned().collect();
            return Err(GoldenError::NoMode { file: f.path.clone(), slug: slug.to_string(), mode: mode.unwrap_or_default(), modes });
        };
        match ks.get(&k) {
            Some(al) => Ok(Golden { al: *al, slug: slug.to_string(), mode, k, file: f.path.clone() }),
            None => Err(GoldenError::NoK { file: f.path.clone(), slug: slug.to_string(), mode, k, have: ks.keys().copied().collect() }),
        }
    }
}

fn parse_file(doc: &Doc) -> Result<GoldenFile, Problems> {
    let mut problems = Problems::default();
    let root = YPath::root();
    let stem = doc.file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut curves = BTreeMap::new();
    let Value::Mapping(top) = &doc.value else {
        return Err(Problems::one(doc.problem(
            &root,
            format!("a golden AL file must be a mapping of model → curve, found {}", type_name(&doc.value)),
            "start with `<model-slug>:`",
        )));
    };
    for (k, v) in top {
        let slug = k.as_str().unwrap_or_default().to_string();
        let p = root.key(&slug);
        let mut curve = Curve::default();
        match v {
            Value::Mapping(m) if m.keys().any(|k| k.as_str().is_some_and(|s| s.starts_with("thinking"))) => {
                for (mk, mv) in m {
                    let mode = mk.as_str().unwrap_or_default().to_string();
                    if !mode.starts_with("thinking") {
                        problems.push(doc.problem(
                            &p.key(&mode),
                            format!("unexpected key `{mode}` next to thinking modes"),
                            "use only `thinking_on` / `thinking_off` at this level",
                        ));
                        continue;
                    }
                    match parse_ks(doc, mv, &p.key(&mode)) {
                        Ok(ks) => {
                            curve.modes.insert(Some(mode), ks);
                        }
                        Err(e) => problems.extend(e),
                    }
                }
            }
            other => match parse_ks(doc, other, &p) {
                Ok(ks) => {
                    curve.modes.insert(None, ks);
                }
                Err(e) => problems.extend(e),
            },
        }
        curves.insert(slug, curve);
    }
    problems.into_result(GoldenFile { path: doc.file.clone(), stem, curves })
}

/// K → AL from a plain map `{1: 1.9, …}` or a list of single-key maps `[{1: 1.9}, …]`.
fn parse_ks(doc: &Doc, v: &Value, p: &YPath) -> Result<BTreeMap<u32, f64>, Problems> {
    let mut out = BTreeMap::new();
    let mut problems = Problems::default();
    let mut add = |k: &Value, val: &Value, problems: &mut Problems| {
        let kk = k.as_u64().or_else(|| k.as_str().and_then(|s| s.parse().ok()));
        match (kk, val.as_f64()) {
            (Some(kk), Some(al)) if kk >= 1 && al >= 1.0 => {
                out.insert(kk as u32, al);
            }
            _ => {
                problems.push(doc.problem(p, format!("bad golden AL entry {k:?}: {val:?}"), "use `K: AL` with integer K ≥ 1 and AL ≥ 1.0"))
            }
        }
    };
    match v {
        Value::Mapping(m) => {
            for (k, val) in m {
                add(k, val, &mut problems);
            }
        }
        Value::Sequence(s) => {
            for item in s {
                match item {
                    Value::Mapping(m) if m.len() == 1 => {
                        let (k, val) = m.iter().next().expect("one entry");
                        add(k, val, &mut problems);
                    }
                    _ => problems.push(doc.problem(p, "list items must be single-key maps `{K: AL}`", "write each item as `- 3: 3.39`")),
                }
            }
        }
        other => problems.push(doc.problem(p, format!("expected K → AL map, found {}", type_name(other)), "write `K: AL` lines")),
    }
    problems.into_result(out)
}

/// The engine settings that make an engine simulate acceptance at `al` (spec §6.3).
pub fn render_sglang(al: f64) -> Vec<(String, String)> {
    vec![
        ("SGLANG_SIMULATE_ACC_LEN".into(), fmt_al(al)),
        ("SGLANG_SIMULATE_ACC_METHOD".into(), "match-expected".into()),
        ("SGLANG_SIMULATE_ACC_TOKEN_MODE".into(), "real-draft-token".into()),
    ]
}

/// TRT-LLM counts accepted draft tokens without the bonus token.
pub fn render_trtllm(al: f64) -> (String, String) {
    ("TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS".into(), fmt_al(((al - 1.0) * 100.0).round() / 100.0))
}

pub fn fmt_al(al: f64) -> String {
    let s = format!("{al:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Checks an explicitly configured AL against the golden value.
pub fn check_explicit(file: &Path, line: Option<usize>, path: &str, explicit: &str, golden: &Golden) -> Result<(), Problem> {
    let v: f64 = explicit.parse().map_err(|_| {
        Problem::new(
            file,
            line,
            path,
            format!("SGLANG_SIMULATE_ACC_LEN `{explicit}` is not a number"),
            format!("set it to the golden value {}", fmt_al(golden.al)),
        )
    })?;
    if (v - golden.al).abs() > 1e-9 {
        return Err(Problem::new(
            file,
            line,
            path,
            format!(
                "SGLANG_SIMULATE_ACC_LEN is {explicit} but the golden AL for {}{} with {} speculative tokens is {} ({})",
                golden.slug,
                golden.mode.as_deref().map(|m| format!(" {m}")).unwrap_or_default(),
                golden.k,
                fmt_al(golden.al),
                golden.file.display()
            ),
            format!(
                "use {} (agentic spec-decode runs must simulate the golden acceptance length), or remove the variable to have it injected",
                fmt_al(golden.al)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in files {
            std::fs::write(d.path().join(n), t).unwrap();
        }
        d
    }

    const QWEN: &str =
        "qwen3.5-397b-a17b-nvfp4:\n  thinking_on:  {1: 1.93, 2: 2.73, 3: 3.39}\n  thinking_off: {1: 1.92, 2: 2.70, 3: 3.33}\n";

    #[test]
    fn lookup_thinking_matrix_and_missing_k() {
        let d = dir_with(&[("qwen3.5_mtp.yaml", QWEN)]);
        let g = GoldenAl::load_dir(d.path()).unwrap();
        assert_eq!(g.lookup("qwen3.5-397b-a17b-nvfp4", None, 3, None).unwrap().al, 3.39);
        assert_eq!(g.lookup("qwen3.5-397b-a17b-nvfp4", Some("thinking_off"), 2, None).unwrap().al, 2.70);
        let e = g.lookup("qwen3.5-397b-a17b-nvfp4", None, 7, None).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("no golden AL for 7") && e.contains("1, 2, 3"), "{e}");
    }

    #[test]
    fn list_and_plain_shapes_and_method_choice() {
        let d = dir_with(&[
            ("kimik3_dspark.yaml", "kimi-k3:\n  thinking_on:\n    - 1: 1.5\n    - 2: 2.0\n"),
            ("kimik3_dspark_probabilistic.yaml", "kimi-k3:\n  thinking_on: {1: 1.4, 2: 1.9}\n"),
            ("plain_mtp.yaml", "plain:\n  1: 1.8\n  2: 2.5\n"),
        ]);
        let g = GoldenAl::load_dir(d.path()).unwrap();
        assert_eq!(g.lookup("kimik3", None, 2, Some("dspark")).unwrap().al, 2.0);
        assert_eq!(g.lookup("kimik3", None, 2, Some("probabilistic")).unwrap().al, 1.9);
        assert_eq!(g.lookup("plain", Some("thinking_on"), 2, None).unwrap().al, 2.5);
    }

    #[test]
    fn renderings() {
        assert_eq!(render_sglang(3.51)[0], ("SGLANG_SIMULATE_ACC_LEN".to_string(), "3.51".to_string()));
        assert_eq!(render_sglang(3.51).len(), 3);
        assert_eq!(render_trtllm(3.39).1, "2.39");
    }

    #[test]
    fn explicit_mismatch_names_both_values() {
        let g = Golden {
            al: 3.51,
            slug: "deepseek-v4.1-flash".into(),
            mode: Some("thinking_on".into()),
            k: 5,
            file: "golden_al/dsv41flash_dspark.yaml".into(),
        };
        let e = check_explicit(Path::new("r.yaml"), Some(3), "arms[0].env", "3.2", &g).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("is 3.2") && s.contains("is 3.51"), "{s}");
        assert!(check_explicit(Path::new("r.yaml"), None, "", "3.51", &g).is_ok());
    }
}
