//! A run's report: charts, `report.md` and `report.html`, and the eval's pages. Reads records;
//! executes nothing.

pub mod report;

pub(crate) use sweep_inputs::{html, problem, recipe};
pub(crate) use sweep_results::{eval, gate, kv, metrics, pareto, price, records, results, twin};
