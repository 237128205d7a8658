//! Swap areas (mm/swapfile.c): each device's slots and their reference counts (swap_map),
//! slot allocation by priority (folio_alloc_swap → get_swap_pages), and what the swap-entry
//! format leaves room for (swapfile_init): whether a migration entry can carry the PTE's
//! young and dirty bits next to the PFN (migration_entry_supports_ad, seed 004).

use crate::arch;
use crate::config::{Config, SwapConfig};
use crate::mm::page::NIL;
use std::collections::{BTreeMap, BTreeSet};

/// SWP_TYPE_SHIFT = BITS_PER_XA_VALUE (63 on 64-bit) − MAX_SWAPFILES_SHIFT (5): the offset
/// bits of an arch-independent swp_entry_t (include/linux/swapops.h).
pub const SWP_TYPE_SHIFT: u32 = 63 - 5;

/// SWAP_MAP_MAX (include/linux/swap.h): the most references a swap_map byte counts.
pub const SWAP_MAP_MAX: u8 = 0x3e;

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

/// One swap area (struct swap_info_struct).
#[derive(Clone, Debug)]
pub struct SwapInfo {
    /// Its priority: swapon -p, or the kernel's automatic -1, -2, ... (least_priority).
    pub prio: i32,
    /// swap_map: the PTEs that hold each slot's entry; 0 = free. Slot 0 is the swap header.
    pub swap_map: Vec<u8>,
    /// Free slots.
    free: BTreeSet<u32>,
    /// Where the next allocation starts looking (the per-CPU cluster's `next` offset, one
    /// cursor here): slots go out in ascending order, so pages swapped out together sit in
    /// neighbouring slots, which is what cluster readahead counts on.
    cluster_next: u32,
    /// zram's compression ratio: the RAM its stored pages take is inuse / ratio.
    pub compression_ratio: f64,
    /// The frames zram's zsmalloc pool holds for the compressed pages.
    pub pool: Vec<u32>,
    /// SWP_SYNCHRONOUS_IO (zram): I/O completes before the call returns.
    pub sync_io: bool,
    /// SWAP_HAS_CACHE per slot: a folio in the swap cache holds the slot too.
    pub has_cache: Vec<bool>,
    /// The swap cache (swap_address_space): the folio of each slot, or NIL.
    pub cache: Vec<u32>,
    /// Block device service times and bandwidth.
    pub read_latency_ns: f64,
    pub write_latency_ns: f64,
    pub bandwidth_gbps: f64,
    /// The cycle the device's queue drains: a new request's transfer starts then at the
    /// earliest.
    pub busy_until: u64,
}

impl SwapInfo {
    /// The area of device `d`, with its priority.
    fn new(d: &SwapConfig, prio: i32) -> SwapInfo {
        let pages = (d.size_mib * 256) as u32;
        let sync_io = d.kind == "zram";
        SwapInfo {
            prio,
            swap_map: vec![0; pages as usize],
            free: (1..pages).collect(),
            cluster_next: 1,
            compression_ratio: d.compression_ratio,
            pool: Vec::new(),
            sync_io,
            has_cache: vec![false; pages as usize],
            cache: vec![NIL; pages as usize],
            read_latency_ns: d.read_latency_us * 1e3,
            write_latency_ns: d.write_latency_us * 1e3,
            bandwidth_gbps: d.bandwidth_gbps,
            busy_until: 0,
        }
    }

    /// The slot is free once no PTE and no swap-cache folio holds it.
    fn maybe_free(&mut self, offset: u32) -> bool {
        let o = offset as usize;
        if self.swap_map[o] == 0 && !self.has_cache[o] {
            self.free.insert(offset);
            return true;
        }
        false
    }

    /// The usable slots (SwapTotal in pages).
    pub fn pages(&self) -> u64 {
        self.swap_map.len() as u64 - 1
    }

    /// inuse_pages: slots taken (by PTEs or the swap cache).
    pub fn inuse_pages(&self) -> u64 {
        self.pages() - self.free.len() as u64
    }
}

/// Every swap area, and the order folio_alloc_swap tries them in.
#[derive(Clone, Debug, Default)]
pub struct SwapAreas {
    pub devices: Vec<SwapInfo>,
    /// The next of several equal-priority areas to take a slot from (the kernel requeues
    /// the area it used at the tail of its priority in swap_avail_heads).
    next_equal: usize,
    /// folio->swap of every folio in a swap cache.
    pub folio_entry: BTreeMap<u32, (usize, u32)>,
    /// Folios under writeback (PG_writeback) and the cycle their write completes.
    pub writeback: BTreeMap<u32, u64>,
    /// Folios read ahead and not yet faulted on (PG_readahead).
    pub readahead: BTreeSet<u32>,
    /// Cluster readahead's window state (shmem swap-in).
    pub cluster_ra: crate::mm::shmem::ClusterRa,
}

impl SwapAreas {
    /// swapon of every `[[machine.swap]]` device, in order.
    pub fn new(cfg: &Config) -> SwapAreas {
        let mut least_priority = 0;
        let devices = cfg
            .machine
            .swap
            .iter()
            .map(|d| {
                let prio = match d.priority {
                    Some(p) => p as i32,
                    None => {
                        least_priority -= 1;
                        least_priority
                    }
                };
                SwapInfo::new(d, prio)
            })
            .collect();
        SwapAreas {
            devices,
            ..Default::default()
        }
    }

    /// get_nr_swap_pages: free slots in all areas.
    pub fn nr_swap_pages(&self) -> u64 {
        self.devices.iter().map(|d| d.free.len() as u64).sum()
    }

    /// total_swap_pages.
    pub fn total_pages(&self) -> u64 {
        self.devices.iter().map(SwapInfo::pages).sum()
    }

    /// folio_alloc_swap → get_swap_pages: a free slot of the highest-priority area that has
    /// one, rotating among areas of equal priority; the slot's count starts at 0, and
    /// SWAP_HAS_CACHE is set only where the folio enters the swap cache (anon on zram is
    /// freed in the same step and skips it).
    pub fn get_swap_page(&mut self) -> Option<(usize, u32)> {
        let best = self
            .devices
            .iter()
            .filter(|d| !d.free.is_empty())
            .map(|d| d.prio)
            .max()?;
        let equal: Vec<usize> = (0..self.devices.len())
            .filter(|&i| self.devices[i].prio == best && !self.devices[i].free.is_empty())
            .collect();
        let ty = equal[self.next_equal % equal.len()];
        self.next_equal = self.next_equal.wrapping_add(1);
        let d = &mut self.devices[ty];
        // alloc_swap_scan_cluster: the first free slot from the cursor on, wrapping around.
        let offset = match d.free.range(d.cluster_next..).next() {
            Some(&o) => o,
            None => *d.free.first()?,
        };
        d.free.remove(&offset);
        d.cluster_next = offset + 1;
        Some((ty, offset))
    }

    /// swap_duplicate: one more PTE holds the entry.
    pub fn swap_duplicate(&mut self, ty: usize, offset: u32) -> bool {
        let count = &mut self.devices[ty].swap_map[offset as usize];
        // SWAP_MAP_MAX: the kernel chains continuation pages beyond it; tierlab refuses.
        if *count >= SWAP_MAP_MAX {
            return false;
        }
        *count += 1;
        true
    }

    /// swap_free / free_swap_and_cache: a PTE dropped the entry; the slot is freed with its
    /// last reference (returns whether it was).
    pub fn swap_free(&mut self, ty: usize, offset: u32) -> bool {
        let d = &mut self.devices[ty];
        let count = &mut d.swap_map[offset as usize];
        *count = count.saturating_sub(1);
        d.maybe_free(offset)
    }

    /// add_to_swap_cache: `pfn` holds slot (ty, offset) in the swap cache.
    pub fn add_to_swap_cache(&mut self, pfn: u32, ty: usize, offset: u32) {
        let d = &mut self.devices[ty];
        d.has_cache[offset as usize] = true;
        d.cache[offset as usize] = pfn;
        self.folio_entry.insert(pfn, (ty, offset));
    }

    /// __delete_from_swap_cache + put_swap_folio: the folio leaves the swap cache; returns
    /// its entry and whether the slot was freed with it.
    pub fn delete_from_swap_cache(&mut self, pfn: u32) -> Option<((usize, u32), bool)> {
        let (ty, offset) = self.folio_entry.remove(&pfn)?;
        self.writeback.remove(&pfn);
        self.readahead.remove(&pfn);
        let d = &mut self.devices[ty];
        d.has_cache[offset as usize] = false;
        d.cache[offset as usize] = NIL;
        Some(((ty, offset), d.maybe_free(offset)))
    }

    /// swap_cache_get_folio: the folio of slot (ty, offset) in the swap cache.
    pub fn lookup(&self, ty: usize, offset: u32) -> Option<u32> {
        let pfn = *self.devices.get(ty)?.cache.get(offset as usize)?;
        (pfn != NIL).then_some(pfn)
    }

    /// folio_migrate_mapping for a swap-cache folio: the slot now names `dst`.
    pub fn migrate_cache(&mut self, src: u32, dst: u32) {
        if let Some((ty, offset)) = self.folio_entry.remove(&src) {
            self.devices[ty].cache[offset as usize] = dst;
            self.folio_entry.insert(dst, (ty, offset));
            if self.readahead.remove(&src) {
                self.readahead.insert(dst);
            }
            if let Some(done) = self.writeback.remove(&src) {
                self.writeback.insert(dst, done);
            }
        }
    }

    /// vm_swap_full: more than half of all swap in use.
    pub fn vm_swap_full(&self) -> bool {
        self.nr_swap_pages() * 2 < self.total_pages()
    }

    /// Frames zram's pool needs for `stored` compressed pages of area `ty`.
    pub fn pool_frames_needed(&self, ty: usize, stored: u64) -> usize {
        (stored as f64 / self.devices[ty].compression_ratio).ceil() as usize
    }

    /// put_swap_folio: give back a slot no PTE took (the folio could not be unmapped).
    pub fn put_swap_folio(&mut self, ty: usize, offset: u32) {
        self.devices[ty].maybe_free(offset);
    }

    /// A slot's references (swap_count).
    pub fn count(&self, ty: usize, offset: u32) -> u8 {
        self.devices
            .get(ty)
            .and_then(|d| d.swap_map.get(offset as usize))
            .copied()
            .unwrap_or(0)
    }
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
