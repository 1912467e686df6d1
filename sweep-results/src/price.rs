//! What a GPU-hour costs, and what that makes a million tokens cost.
//!
//! Prices are data a user or a team keeps (`--prices FILE`), never numbers built into the tool:
//! rental and ownership costs differ by provider, contract and month, and a dollar figure without
//! a source would read as a fact. Every price names its source; without a price for a point's
//! GPU, no dollar figure appears for it.
//!
//! ```yaml
//! currency: USD
//! prices:
//!   h200: {per_gpu_hour: 3.50, source: "provider X on-demand list price, 2026-11"}
//!   b200: {per_gpu_hour: 5.25, source: "team contract, 2026-Q4"}
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::problem::{Problem, Problems};
use crate::yaml::{Doc, YPath};

/// A price file: the currency and, per GPU (`h200`, `b200`, `gb300`, … as InferenceX names the
/// hardware), what one GPU-hour costs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// ISO 4217 code the prices are in (shown beside every figure).
    pub currency: String,
    pub prices: BTreeMap<String, GpuPrice>,
}

/// What one GPU-hour of one kind costs, and who says so.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GpuPrice {
    pub per_gpu_hour: f64,
    pub source: String,
}

/// Cost per million tokens of a point: its GPUs' time divided by the tokens they served.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TokenCost {
    /// Per million input (prompt) tokens, the whole GPU time charged to them.
    pub per_mtok_input: f64,
    /// Per million output tokens, the whole GPU time charged to them.
    pub per_mtok_output: f64,
    /// Per million tokens, input and output together.
    pub per_mtok_total: f64,
}

/// A point's cost per million tokens, published and predicted, with the price it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointCost {
    pub currency: String,
    pub per_gpu_hour: f64,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<TokenCost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<TokenCost>,
}

impl PriceTable {
    /// Reads a price file within the YAML limits; a missing source, a price that is not a
    /// positive number or an unknown field is refused with its line.
    pub fn load(path: &Path) -> Result<PriceTable, Problems> {
        let text = std::fs::read_to_string(path).map_err(|e| Problems::io(path, &e))?;
        Self::parse(path, &text)
    }

    /// [`load`](Self::load) from text already read (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<PriceTable, Problems> {
        let doc: Doc = crate::yaml::parse(path, text)?;
        let t: PriceTable = crate::yaml::parse_typed(path, text)?;
        let mut problems: Vec<Problem> = Vec::new();
        let cur = &t.currency;
        if cur.len() != 3 || !cur.chars().all(|c| c.is_ascii_uppercase()) {
            let at = YPath::root().key("currency");
            problems.push(doc.problem(
                &at,
                format!("currency `{cur}` is not an ISO 4217 code"),
                "write it as three capitals, e.g. USD or EUR",
            ));
        }
        for (gpu, p) in &t.prices {
            let at = YPath::root().key("prices").key(gpu);
            if !(p.per_gpu_hour.is_finite() && p.per_gpu_hour > 0.0) {
                let msg = format!("{gpu}: per_gpu_hour {} is not a positive price", p.per_gpu_hour);
                problems.push(doc.problem(&at.key("per_gpu_hour"), msg, "give what one GPU-hour costs, above 0"));
            }
            if p.source.trim().is_empty() {
                let msg = format!("{gpu}: the price has no source");
                problems.push(doc.problem(&at.key("source"), msg, "say where the price comes from (provider, list or contract, date)"));
            }
        }
        if t.prices.is_empty() {
            problems.push(doc.problem(&YPath::root().key("prices"), "no prices", "give at least one GPU's price per GPU-hour"));
        }
        if problems.is_empty() { Ok(t) } else { Err(Problems(problems)) }
    }

    /// The price of a GPU by its hardware name; a fitted or derived profile name
    /// (`h200-fitted`, `gb300-from-b200-fitted`) is priced as the GPU it starts with.
    pub fn price_of(&self, hardware: &str) -> Option<&GpuPrice> {
        self.prices.get(hardware).or_else(|| {
            let (gpu, _) = hardware.split_once('-')?;
            self.prices.get(gpu)
        })
    }

    /// The cost of a point on `hardware` from its total and output throughput per GPU (tokens
    /// per second), published and predicted; `None` without a price for that GPU.
    pub fn point_cost(&self, hardware: &str, published: Option<(f64, f64)>, predicted: Option<(f64, f64)>) -> Option<PointCost> {
        let p = self.price_of(hardware)?;
        let cost = |(total, out): (f64, f64)| self.token_cost(hardware, total - out, out);
        Some(PointCost {
            currency: self.currency.clone(),
            per_gpu_hour: p.per_gpu_hour,
            source: p.source.clone(),
            published: published.and_then(cost),
            predicted: predicted.and_then(cost),
        })
    }

    /// Cost per million tokens of a point on `hardware` that served the given tokens per second
    /// per GPU; `None` without a price for that GPU, or when the point served no tokens.
    pub fn token_cost(&self, hardware: &str, input_per_gpu_s: f64, output_per_gpu_s: f64) -> Option<TokenCost> {
        let p = self.price_of(hardware)?;
        let per_gpu_s = p.per_gpu_hour / 3600.0;
        let per_mtok = |tok_s: f64| if tok_s > 0.0 && tok_s.is_finite() { per_gpu_s / tok_s * 1e6 } else { f64::NAN };
        let total = input_per_gpu_s + output_per_gpu_s;
        (total > 0.0).then(|| TokenCost {
            per_mtok_input: per_mtok(input_per_gpu_s),
            per_mtok_output: per_mtok(output_per_gpu_s),
            per_mtok_total: per_mtok(total),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PriceTable, Problems> {
        PriceTable::parse(Path::new("prices.yaml"), text)
    }

    #[test]
    fn a_million_tokens_costs_the_gpu_time_they_took() {
        let t = parse("currency: USD\nprices:\n  h200: {per_gpu_hour: 3.6, source: list}\n").unwrap();
        // 3.6 $/h is 0.001 $/s; 1,000 output tok/s per GPU is 1,000 s per million: 1 $.
        let c = t.token_cost("h200", 9_000.0, 1_000.0).unwrap();
        assert!((c.per_mtok_output - 1.0).abs() < 1e-12, "{c:?}");
        assert!((c.per_mtok_input - 1.0 / 9.0).abs() < 1e-12, "{c:?}");
        assert!((c.per_mtok_total - 0.1).abs() < 1e-12, "{c:?}");
    }

    #[test]
    fn a_fitted_profile_is_priced_as_its_gpu_and_an_unpriced_gpu_gets_no_figure() {
        let t = parse("currency: USD\nprices:\n  b200: {per_gpu_hour: 5, source: contract}\n").unwrap();
        assert_eq!(t.price_of("b200-fitted").map(|p| p.per_gpu_hour), Some(5.0));
        assert!(t.token_cost("h200", 100.0, 10.0).is_none());
        assert!(t.token_cost("b200", 0.0, 0.0).is_none(), "a point that served nothing has no cost per token");
    }

    #[test]
    fn a_price_without_a_source_or_not_positive_is_refused_with_its_line() {
        let e = parse("currency: USD\nprices:\n  h200:\n    per_gpu_hour: 3.5\n    source: ''\n  b200: {per_gpu_hour: -1, source: x}\n")
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("h200: the price has no source") && text.contains("prices.yaml:5"), "{text}");
        assert!(text.contains("b200: per_gpu_hour -1 is not a positive price") && text.contains("prices.yaml:6"), "{text}");
    }

    #[test]
    fn unknown_fields_and_a_bad_currency_are_refused() {
        let e = parse("currency: USD\nprices:\n  h200: {per_gpu_hour: 3, source: x, discount: 0.2}\n").unwrap_err();
        assert!(e.to_string().contains("discount"), "{e}");
        let e = parse("currency: dollars\nprices:\n  h200: {per_gpu_hour: 3, source: x}\n").unwrap_err();
        assert!(e.to_string().contains("ISO 4217") && e.to_string().contains("prices.yaml:1"), "{e}");
    }
}
