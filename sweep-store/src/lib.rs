//! The results store: runs, points and metrics in SQLite or Postgres, imported from run folders
//! and queried by history, comparison and the dashboard. Reads records; executes nothing, and
//! knows no HTTP server.

pub mod store;

pub(crate) use sweep_inputs::recipe;
pub(crate) use sweep_results::{gate, metrics, noise, pareto, power, records, results};
