//! The limits every input is read within, and what messages quote of it: shared by the engine
//! (its profiles and flags) and the harness's inputs (master config, recipes, changelog), and
//! below both, so that neither reaches the other for them.

pub mod text;
pub mod yaml;
