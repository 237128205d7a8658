//! The simulated hardware: CPUs with their TLBs, and memory nodes.

pub mod cache;
pub mod cpu;
pub mod tlb;
