//! The zones below a node's highest (zone_sizes_init in arch/x86/mm/init.c,
//! setup_per_zone_lowmem_reserve in mm/page_alloc.c). tierlab folds each node into one zone,
//! but on x86-64 the memory below 16 MiB is ZONE_DMA and the memory below 4 GiB ZONE_DMA32.
//! A user allocation (GFP_HIGHUSER_MOVABLE) takes a lower zone's pages only while the zone's
//! free pages exceed its low watermark plus its lowmem_reserve against the highest zone
//! (zone_watermark_fast), so that many stay free: out of the workload's reach, yet counted in
//! the node's NR_FREE_PAGES, which prepare_scan_control's file_is_tiny sums over the zones.
//!
//! arm64 sizes its ZONE_DMA from the devices' DMA limits (zone_dma_limit), which tierlab does
//! not model: there a node is one zone.

use crate::mm::page_alloc::{zone_wmarks, Watermarks};

/// MAX_DMA_PFN (arch/x86/include/asm/dma.h): ZONE_DMA ends at 16 MiB.
const MAX_DMA_PFN: u64 = (16 << 20) >> 12;
/// MAX_DMA32_PFN: ZONE_DMA32 ends at 4 GiB.
const MAX_DMA32_PFN: u64 = 1 << (32 - 12);
/// setup_arch always reserves the first 1 MiB on x86-64 (since 5.13), so managed pages start
/// there: ZONE_DMA manages 3,840 pages, as a 6.12 guest's /proc/zoneinfo shows.
const FIRST_MANAGED_PFN: u64 = (1 << 20) >> 12;
/// sysctl_lowmem_reserve_ratio[ZONE_DMA] and [ZONE_DMA32].
const LOWMEM_RESERVE_RATIO: [u64; 2] = [256, 256];

/// One zone below its node's highest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerZone {
    pub managed: u64,
    pub wmark: Watermarks,
    /// lowmem_reserve[ZONE_MOVABLE]: managed pages of the zones above it / the ratio.
    pub lowmem_reserve: u64,
    /// Free pages user allocations leave it: min(managed, low + lowmem_reserve).
    pub free: u64,
}

/// The lower zones of every node, for nodes laid out in order from physical address 0
/// (each `node_pages[n]` managed pages); none on arm64.
pub fn lower_zones(
    x86: bool,
    node_pages: &[u64],
    min_free_kbytes: u64,
    watermark_scale_factor: u32,
) -> Vec<Vec<LowerZone>> {
    let lowmem_pages: u64 = node_pages.iter().sum();
    let mut start = FIRST_MANAGED_PFN;
    let mut out = Vec::new();
    for &pages in node_pages {
        let mut lower = Vec::new();
        if x86 {
            let spans = x86_zone_pages(start, pages);
            let highest = spans.iter().rposition(|&p| p > 0).unwrap_or(0);
            for i in 0..highest {
                if spans[i] == 0 {
                    continue;
                }
                let above: u64 = spans[i + 1..].iter().sum();
                let lowmem_reserve = above / LOWMEM_RESERVE_RATIO[i];
                let wmark = zone_wmarks(
                    spans[i],
                    lowmem_pages,
                    min_free_kbytes,
                    watermark_scale_factor,
                );
                lower.push(LowerZone {
                    managed: spans[i],
                    wmark,
                    lowmem_reserve,
                    free: spans[i].min(wmark.low + lowmem_reserve),
                });
            }
        }
        out.push(lower);
        start += pages;
    }
    out
}

/// zone_sizes_init on x86-64: the pages of physical pfns [start, start + pages) in ZONE_DMA,
/// ZONE_DMA32 and ZONE_NORMAL.
fn x86_zone_pages(start: u64, pages: u64) -> [u64; 3] {
    let end = start + pages;
    let span = |lo: u64, hi: u64| end.min(hi).saturating_sub(start.max(lo));
    [
        span(0, MAX_DMA_PFN),
        span(MAX_DMA_PFN, MAX_DMA32_PFN),
        span(MAX_DMA32_PFN, u64::MAX),
    ]
}

/// The free pages of a node's lower zones, summed.
pub fn lower_free(zones: &[LowerZone]) -> u64 {
    zones.iter().map(|z| z.free).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_first_node_has_zone_dma_below_zone_dma32_and_the_next_node_none() {
        // hot_small's guest: 213 MiB on node 0, 512 MiB of CXL on node 1; Debian's
        // min_free_kbytes for 725 MiB is 2,896 (calculate_min_free_kbytes).
        let zones = lower_zones(true, &[54_528, 131_072], 2_896, 10);
        assert_eq!(zones[1], vec![]);
        let dma = zones[0][0];
        assert_eq!(zones[0].len(), 1);
        assert_eq!(dma.managed, 3_840);
        // (54,528 - 3,840) / 256: the guest printed protection 191 (its DMA32 grew after boot).
        assert_eq!(dma.lowmem_reserve, 198);
        // Its share of min_free_kbytes: 724 pages × 3,840 / 185,600, and the min/4 gap.
        assert_eq!((dma.wmark.min, dma.wmark.low), (14, 17));
        assert_eq!(dma.free, 17 + 198);
    }

    #[test]
    fn a_large_first_node_keeps_all_of_zone_dma_and_part_of_zone_dma32() {
        let gib = 1 << 18;
        let zones = lower_zones(true, &[64 * gib], 65_536, 10);
        let [dma, dma32] = zones[0][..] else {
            panic!("two lower zones: {:?}", zones[0])
        };
        assert_eq!(dma.free, 3_840);
        let normal = 64 * gib - dma.managed - dma32.managed;
        assert_eq!(dma32.managed, MAX_DMA32_PFN - MAX_DMA_PFN);
        assert_eq!(dma32.lowmem_reserve, normal / 256);
        assert_eq!(dma32.free, dma32.wmark.low + normal / 256);
    }

    #[test]
    fn arm64_nodes_are_one_zone() {
        assert!(lower_zones(false, &[54_528], 2_896, 10)[0].is_empty());
    }
}
