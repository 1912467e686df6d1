//! Where requests go. [`sim`]: the reference engine in process on a virtual clock (one
//! discrete-event loop drives the workload and the engine together).

pub mod sim;
