//! A point's power keys in `agg.json`: measured telemetry integrated over its window as
//! InferenceX integrates it, or the reference engine's prediction over the same window. Both
//! give the same keys; `power_source` says which, and a prediction names its power model.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::report::summary_of;
use super::{LocalOffset, PowerMetrics, PowerValidation, evaluate, load_benchmark_data};

/// Where a point's power comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum PointPower {
    /// Sampled on the server's host while the point ran.
    Measured {
        /// The monitor's command line; `None` when none ran.
        #[serde(default)]
        monitor: Option<String>,
        /// Why no telemetry was sampled (no tool on this host, the server elsewhere).
        #[serde(default)]
        note: Option<String>,
        /// The telemetry text, its zone-less timestamps in UTC (the monitor runs under
        /// `TZ=UTC0`); `None` when the monitor wrote no file.
        #[serde(skip)]
        csv: Option<String>,
    },
    /// The reference engine's power model over the profiling window.
    Predicted {
        /// Every GPU of the point over the window, joules.
        total_gpu_energy_j: f64,
        /// The hardware profile's power block, with its source.
        model: Value,
    },
}

/// The headline power figures of a valid point, for the summary table, reports and the gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerFigures {
    /// `measured` or `predicted`.
    pub source: String,
    pub avg_power_w: f64,
    pub total_gpu_energy_j: f64,
    pub joules_per_output_token: f64,
    pub joules_per_total_token: f64,
}

impl PowerFigures {
    fn of(source: &str, m: &PowerMetrics) -> PowerFigures {
        PowerFigures {
            source: source.to_string(),
            avg_power_w: m.avg_power_w,
            total_gpu_energy_j: m.total_gpu_energy_j,
            joules_per_output_token: m.joules_per_output_token,
            joules_per_total_token: m.joules_per_total_token,
        }
    }
}

/// What a point's power gives: the keys merged into `agg.json`, the validation record (measured
/// points: `power_validation.json`) and the figures when valid.
#[derive(Clone, Debug, PartialEq)]
pub struct PointPowerResult {
    pub keys: Map<String, Value>,
    pub validation: Option<PowerValidation>,
    pub figures: Option<PowerFigures>,
}

/// The power of a point whose benchmark window is `window` (a `benchmark_serving` result, or the
/// AgentX profiling window in its shape: `benchmark_start_time_unix`, `benchmark_end_time_unix`,
/// `duration`, `completed`, `total_input_tokens`, `total_output_tokens`) on `gpus` GPUs.
pub fn point_power(power: &PointPower, window: &Value, gpus: u32) -> PointPowerResult {
    let text = window.to_string();
    let mut keys = Map::new();
    match power {
        PointPower::Measured { monitor, note, csv } => {
            let r = evaluate(&text, csv.as_deref(), LocalOffset(0), Some(i64::from(gpus)));
            merge(&mut keys, &r.summary);
            keys.insert("power_source".into(), json!("measured"));
            keys.insert("power_monitor".into(), json!({"command": monitor, "note": note}));
            if !r.validation.reasons.is_empty() {
                keys.insert("power_invalid_reasons".into(), json!(r.validation.reasons));
            }
            let figures = r.metrics.filter(|_| r.validation.power_valid).map(|m| PowerFigures::of("measured", &m));
            PointPowerResult { keys, validation: Some(r.validation), figures }
        }
        PointPower::Predicted { total_gpu_energy_j, model } => {
            let (bench, reasons) = load_benchmark_data(&text);
            let metrics = bench.filter(|_| reasons.is_empty()).and_then(|b| {
                let total_w = total_gpu_energy_j / b.integration_duration_s();
                PowerMetrics::of_energy(*total_gpu_energy_j, total_w / f64::from(gpus.max(1)), total_w, &b)
            });
            let metrics = metrics.filter(PowerMetrics::is_finite);
            merge(&mut keys, &summary_of(metrics));
            keys.insert("power_source".into(), json!("predicted"));
            keys.insert("power_model".into(), model.clone());
            if metrics.is_none() {
                keys.insert("power_invalid_reasons".into(), json!(reasons));
            }
            PointPowerResult { keys, validation: None, figures: metrics.map(|m| PowerFigures::of("predicted", &m)) }
        }
    }
}

fn merge(keys: &mut Map<String, Value>, summary: &super::PowerSummary) {
    if let Ok(Value::Object(m)) = serde_json::to_value(summary) {
        keys.extend(m);
    }
}
