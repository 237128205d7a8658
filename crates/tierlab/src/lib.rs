//! tierlab: a fast, deterministic simulator of Linux memory management on tiered-memory
//! machines. See design.md in the shared folder for the architecture.

pub mod arch;
pub mod check;
pub mod config;
pub mod cost;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod phases;
pub mod policy;
pub mod report;
pub mod sched;
pub mod sim;
pub mod stats;
pub mod workload;

pub use config::Config;
pub use sim::{Sim, SimError};
