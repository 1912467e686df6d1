//! The dashboard: the store's runs served over HTTP as pages and JSON. Reads the store; never
//! runs a point, a plan or a trace.

pub mod dashboard;

pub(crate) use sweep_inputs::{html, recipe, repo};
pub(crate) use sweep_results::{gate, pareto, results};
pub(crate) use sweep_store::store;
