//! Memory-tiering policies: what decides, on a NUMA hint fault, whether a slow-tier folio is
//! promoted, and which extra watermark (if any) keeps headroom on the top tier. Policies are
//! called per event (hint fault, boot), never per access.
//!
//! To add a policy: write `policy/NAME.rs` with a type implementing `TieringPolicy`, and add
//! one line to `POLICIES`. `kernel.tiering_policy = "NAME"` selects it; `tierlab compare
//! --policies` runs every registered one.

pub mod linux;
pub mod tpp;

use crate::kernel::Kernel;
use crate::machine::Machine;

pub trait TieringPolicy: Send {
    /// should_numa_migrate_memory's memory-tiering branch: a hint fault by CPU `c` hit folio
    /// `pfn` on slow-tier node `src`; promote it to top-tier node `dst`?
    fn should_promote(
        &mut self,
        k: &mut Kernel,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        src: usize,
        dst: usize,
    ) -> bool;

    /// The demotion watermark of top-tier node `n` (pages; 0: none): an allocation that
    /// leaves the node below it wakes kswapd, which then demotes until free pages exceed it.
    fn demote_wmark(&self, k: &Kernel, n: usize) -> u64;
}

/// A registered policy: its name, what it models, its knob defaults (applied to a scenario
/// that selects it and does not set them) and its constructor.
pub struct PolicyEntry {
    pub name: &'static str,
    pub doc: &'static str,
    pub knob_defaults: &'static [(&'static str, &'static str)],
    /// Knobs only this policy reads: setting one under another policy is an error.
    pub own_knobs: &'static [&'static str],
    pub new: fn() -> Box<dyn TieringPolicy>,
}

/// Every policy tierlab knows, by `kernel.tiering_policy` name.
pub const POLICIES: &[PolicyEntry] = &[linux::ENTRY, tpp::ENTRY];

/// The registered policy of that name.
pub fn lookup(name: &str) -> Result<&'static PolicyEntry, String> {
    POLICIES.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
        format!(
            "unknown tiering policy `{name}`; registered: {}",
            names.join(", ")
        )
    })
}
