//! Check 6: the master entries a pull request adds or changes run upstream vLLM / SGLang images on
//! established SKUs (digest pins welcome, a malformed digest refused), and a non-vLLM/SGLang
//! framework lands only after a vLLM or SGLang entry of the same model and SKU.

use super::scan::sku;
use super::{Check, Ctx, Finding};

/// SKUs that are not "new hardware" (the verifier's list).
const ESTABLISHED: [&str; 9] = ["h100", "h200", "b200", "b300", "gb200", "gb300", "mi300x", "mi325x", "mi355x"];

/// An image reference split into repository, tag and digest (`#` read as `/`, `docker.io/`
/// dropped).
#[derive(Debug, PartialEq)]
pub struct ImageRef {
    pub repo: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

pub fn parse_image(image: &str) -> ImageRef {
    let s = image.trim().replace('#', "/");
    let s = s.strip_prefix("docker.io/").unwrap_or(&s).to_string();
    let (name, digest) = match s.split_once('@') {
        Some((n, d)) => (n.to_string(), Some(d.to_string())),
        None => (s.clone(), None),
    };
    // A tag follows the last `:` after the last `/` (a registry port comes before it).
    let slash = name.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (repo, tag) = match name[slash..].rfind(':') {
        Some(i) => (name[..slash + i].to_string(), Some(name[slash + i + 1..].to_string())),
        None => (name.clone(), None),
    };
    ImageRef { repo, tag, digest }
}

fn valid_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn upstream(framework: &str, repo: &str) -> Option<bool> {
    match framework {
        "vllm" => Some(matches!(repo, "vllm/vllm-openai" | "vllm/vllm-openai-rocm")),
        "sglang" => Some(matches!(repo, "lmsysorg/sglang" | "lmsysorg/sglang-rocm")),
        _ => None,
    }
}

pub fn check(ctx: &Ctx) -> Check {
    if ctx.changed_keys.is_empty() {
        return Check::na(6, "no master-config entry added or changed");
    }
    let exception = ctx.facts.and_then(|f| f.exception(6));
    let mut bad = Vec::new();
    let mut ok = Vec::new();
    for key in &ctx.changed_keys {
        let Some(e) = ctx.head.master.get(key) else { continue };
        let (file, line) = ctx.master_line(key, "image");
        let img = parse_image(&e.image);
        if let Some(d) = &img.digest
            && !valid_digest(d)
        {
            bad.push(Finding::new(&file, line, &e.image, format!("{key}: `@{d}` is not a sha256 digest (`@sha256:` and 64 hex digits)")));
            continue;
        }
        let hw = sku(&e.runner);
        let established = ESTABLISHED.contains(&hw.as_str());
        match upstream(&e.framework, &img.repo) {
            Some(false) if established => {
                bad.push(Finding::new(
                    &file,
                    line,
                    &e.image,
                    format!(
                        "{key}: {} on established {} is not an upstream image ({})",
                        e.framework,
                        hw.to_ascii_uppercase(),
                        if e.framework == "vllm" { "vllm/vllm-openai[-rocm]" } else { "lmsysorg/sglang[-rocm]" }
                    ),
                ));
                continue;
            }
            Some(_) => {}
            None => {
                // Engine-first: a new non-vLLM/SGLang entry needs a vLLM or SGLang one for the same
                // model and SKU.
                let new = ctx.base.master.get(key).is_none();
                let sibling = ctx.head.master.entries.iter().find(|o| {
                    o.key != *key
                        && o.model_prefix == e.model_prefix
                        && sku(&o.runner) == hw
                        && matches!(o.framework.as_str(), "vllm" | "sglang")
                });
                match sibling {
                    Some(s) => ok.push(format!("{key} after {}", s.key)),
                    None if new => {
                        let (f, l) = ctx.master_line(key, "framework");
                        bad.push(Finding::new(
                            f,
                            l,
                            format!("framework: {}", e.framework),
                            format!("{key}: no vLLM or SGLang entry for {} on {} lands first", e.model_prefix, hw.to_ascii_uppercase()),
                        ));
                        continue;
                    }
                    None => {}
                }
            }
        }
        let pin = match (&img.digest, &img.tag) {
            (Some(_), _) => "pinned by digest",
            (None, Some(_)) => "tag, not pinned by digest",
            (None, None) => "no tag",
        };
        ok.push(format!("{} ({pin})", e.image));
    }
    if bad.is_empty() {
        return Check::pass(6, ok.join("; "));
    }
    if let Some(x) = exception {
        return Check::pass(6, format!("documented exception: {x} ({})", super::summarise(&bad)));
    }
    Check::from_findings(6, bad, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        let r = parse_image("lmsysorg/sglang:v0.5.5-cu129@sha256:ddae0e399d3d94f7827f16183301cf8dac4cf0eae0ef25590b7dac5881d713d8");
        assert_eq!((r.repo.as_str(), r.tag.as_deref()), ("lmsysorg/sglang", Some("v0.5.5-cu129")));
        assert!(valid_digest(r.digest.as_deref().unwrap()));
        assert_eq!(parse_image("nvcr.io#nvidia/tensorrt-llm/release:1.2").repo, "nvcr.io/nvidia/tensorrt-llm/release");
        assert_eq!(parse_image("localhost:5000/vllm").repo, "localhost:5000/vllm");
        assert!(!valid_digest("sha256:abc"));
        assert_eq!(upstream("sglang", "rocm/sgl-dev"), Some(false));
    }
}
