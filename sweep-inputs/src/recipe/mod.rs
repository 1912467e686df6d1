//! Configuration: the InferenceX master config, `runners.yaml`, and sweep's serving recipes.

pub mod master;
pub mod runners;
pub(crate) mod schema;
pub mod seq_len;
pub mod serving;

pub use master::{Conc, Entry, Master, SearchRow, Topology};
pub use runners::Runners;
pub use seq_len::SeqLen;
