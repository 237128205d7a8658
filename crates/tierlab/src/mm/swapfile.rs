//! What the swap-entry format leaves room for (mm/swapfile.c swapfile_init,
//! include/linux/swapops.h): whether a migration entry can carry the PTE's young and dirty
//! bits next to the PFN (migration_entry_supports_ad, seed 004).

use crate::arch;
use crate::config::Config;

/// SWP_TYPE_SHIFT = BITS_PER_XA_VALUE (63 on 64-bit) − MAX_SWAPFILES_SHIFT (5): the offset
/// bits of an arch-independent swp_entry_t (include/linux/swapops.h).
pub const SWP_TYPE_SHIFT: u32 = 63 - 5;

/// SWP_PFN_BITS = MAX_PHYSMEM_BITS − PAGE_SHIFT: the offset bits a PFN swap entry needs.
pub fn swp_pfn_bits(cfg: &Config) -> u32 {
    arch::max_physmem_bits(cfg) - crate::mm::pgtable::PAGE_SHIFT
}

/// SWP_MIG_TOTAL_BITS: the PFN plus SWP_MIG_YOUNG_BIT and SWP_MIG_DIRTY_BIT above it.
pub fn swp_mig_total_bits(cfg: &Config) -> u32 {
    swp_pfn_bits(cfg) + 2
}

/// swapfile_init: swap_migration_ad_supported is set when swapfile_maximum_size (the
/// arch's limit on swap offsets) covers SWP_MIG_TOTAL_BITS. Kernels before 6.1 never keep
/// the bits (`kernel.migration_entry_ad = false`).
pub fn swap_migration_ad_supported(cfg: &Config) -> bool {
    cfg.kernel.migration_entry_ad && arch::max_swapfile_size(cfg) >= 1u64 << swp_mig_total_bits(cfg)
}

/// generic_max_swapfile_size: the largest offset that survives a round trip through the
/// arch's swap PTE, plus one, at most the arch-independent field.
pub fn generic_max_swapfile_size(arch_offset_bits: u32) -> u64 {
    1u64 << arch_offset_bits.min(SWP_TYPE_SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(sets: &[&str]) -> Config {
        let toml = r#"
[machine]
cpus = 1
nodes = [{ capacity_mib = 64, read_latency_ns = 100, write_latency_ns = 100, cpus = "0" }]
[workload]
type = "scripted"
[[workload.regions]]
name = "r"
size_mib = 1
[[workload.phases]]
kind = "touch"
region = "r"
"#;
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Config::from_str_with(toml, "test", None, &sets).unwrap()
    }

    #[test]
    fn x86_keeps_ad_bits_unless_l1tf_caps_the_offset_below_the_pfn_and_two_bits() {
        // No L1TF: 50 offset bits in the x86-64 swap PTE, far above 34 + 2.
        assert!(swap_migration_ad_supported(&cfg(&[])));
        // L1TF with 46 physical bits (Broadwell-EP): (1 << (46 − 1 − 12)) << 3 = 2^36, just
        // enough for SWP_MIG_TOTAL_BITS = 36, as on Peter Xu's E5-2630 v4.
        let bdw = cfg(&["machine.l1tf=true", "machine.phys_bits=46"]);
        assert_eq!(arch::max_swapfile_size(&bdw), 1 << 36);
        assert!(swap_migration_ad_supported(&bdw));
        // L1TF with 39 physical bits (a client core): 2^29 offsets, no room.
        let client = cfg(&["machine.l1tf=true", "machine.phys_bits=39"]);
        assert!(!swap_migration_ad_supported(&client));
        // The same core booted with l1tf=off has the full offset back.
        let off = cfg(&["machine.l1tf=true", "machine.phys_bits=39", "x86.l1tf=off"]);
        assert!(swap_migration_ad_supported(&off));
        // Kernels before 6.1 never keep them.
        assert!(!swap_migration_ad_supported(&cfg(&[
            "kernel.migration_entry_ad=false"
        ])));
    }
}
