//! Booting the memory manager (mm/mm_init.c, mm/page_alloc.c): frames for every node, the
//! zone of each node with its free lists, watermarks and per-CPU pagesets, the zonelists, the
//! zero page, memory tiers, the architecture's TLB state and the tiering policy.

use crate::arch::Arch;
use crate::check::Checker;
use crate::config::Config;
use crate::kernel::{Kernel, Timers};
use crate::mm::filemap::PageCacheFile;
use crate::mm::lowmem_reserve::{lower_free, lower_zones};
use crate::mm::memory_tiers::MemoryTiers;
use crate::mm::mm_types::Mm;
use crate::mm::mmzone::Pgdat;
use crate::mm::page::FrameTable;
use crate::mm::page_alloc::{
    calculate_min_free_kbytes, setup_per_zone_wmarks, setup_zone_pagesets, Zone,
};
use crate::sched::Scheduler;
use crate::sim::SimError;
use crate::stats::VmCounters;
use crate::workload::FileSpec;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

impl Kernel {
    /// Boot: build every node's frames and zone, reserve the zero page, set the watermarks
    /// and pagesets, and start the architecture and tiering policy the config names.
    pub fn boot(cfg: Config, files: &[FileSpec], nproc: u32) -> Result<Kernel, SimError> {
        let arch = Arch::new(&cfg);
        let policy = crate::policy::lookup(&cfg.kernel.tiering_policy)
            .map_err(|e| SimError(format!("kernel.tiering_policy: {e}")))?;
        let m = &cfg.machine;
        let node_cpus = cfg.node_cpus();
        let node_pages: Vec<u64> = m.nodes.iter().map(|n| n.capacity_mib * 256).collect();
        let mut frames = FrameTable::new(&node_pages);
        let ncpus = m.cpus as usize;

        let mut zones = Vec::new();
        let mut start = 0u32;
        for (n, &pages) in node_pages.iter().enumerate() {
            zones.push(Zone::new(n as u8, start, pages, ncpus, &mut frames));
            start += pages as u32;
        }
        let total: u64 = node_pages.iter().sum();
        let mut min_free_kbytes = if cfg.vm.min_free_kbytes > 0 {
            cfg.vm.min_free_kbytes
        } else {
            calculate_min_free_kbytes(total)
        };
        if cfg.vm.transparent_hugepage_enabled != crate::config::ThpEnabled::Never {
            // khugepaged starts with THP on and raises min_free_kbytes for huge allocations
            // (set_recommended_min_free_kbytes), with the watermarks the first value gave.
            setup_per_zone_wmarks(&mut zones, min_free_kbytes, cfg.vm.watermark_scale_factor);
            let free_buffer: u64 = zones
                .iter()
                .map(|z| z.managed_pages.saturating_sub(z.wmark.high))
                .sum();
            let x86 = m.arch == crate::config::Arch::X86;
            let nr_zones = crate::mm::huge_memory::populated_zones(x86, &node_pages);
            let recommended =
                crate::mm::huge_memory::recommended_min_free_kbytes(nr_zones, free_buffer);
            min_free_kbytes = min_free_kbytes.max(recommended);
        }
        // The zones below each node's highest: their free pages that user allocations leave.
        // tierlab's one zone per node keeps the whole node's watermarks (their sum).
        let lower_zones = lower_zones(
            m.arch == crate::config::Arch::X86,
            &node_pages,
            min_free_kbytes,
            cfg.vm.watermark_scale_factor,
        );
        setup_per_zone_wmarks(&mut zones, min_free_kbytes, cfg.vm.watermark_scale_factor);
        let cpus_on_node: Vec<u32> = node_cpus.iter().map(|c| c.len() as u32).collect();
        setup_zone_pagesets(
            &mut zones,
            &cpus_on_node,
            m.cpus,
            cfg.vm.percpu_pagelist_high_fraction,
        );
        // The series level; before patch 6/7 high is fixed at zone_highsize (high_min), and
        // patch 3's cacheinfo flag comes from the CPU's data cache (patch 2).
        let level = cfg.vm.pcp_series;
        let cache_pages = cfg.machine.data_cache_per_cpu_kib / 4;
        for pcp in zones.iter_mut().flat_map(|z| z.pcp.iter_mut()) {
            pcp.level = level;
            if !level.has(7) {
                pcp.high_max = pcp.high_min;
                pcp.high = pcp.high_min;
            }
            if cache_pages > 0 {
                pcp.set_cacheinfo(cache_pages);
            }
        }

        // The zero page is reserved at boot, outside every LRU.
        let zero_pfn = {
            let pfn = zones[0].alloc_pages_boot(&mut frames, 0);
            let pfn = pfn.expect("node 0 has a free page at boot");
            frames.get_mut(pfn).flags = crate::mm::page::pg::USED;
            pfn
        };
        let mut set_aside: Vec<Vec<u32>> = vec![Vec::new(); node_pages.len()];
        // Memory the kernel holds from boot on each node (reserved_mib): taken from the buddy
        // allocator like the zero page, never on an LRU.
        for (n, zone) in zones.iter_mut().enumerate() {
            for _ in 0..m.nodes[n].reserved_mib * 256 {
                let pfn = zone.alloc_pages_boot(&mut frames, 0);
                let pfn = pfn.expect("validation checked reserved_mib against the capacity");
                frames.get_mut(pfn).flags =
                    crate::mm::page::pg::USED | crate::mm::page::pg::RESERVED;
            }
            // The lower zones' free pages that user allocations leave alone: set aside.
            for _ in 0..lower_free(&lower_zones[n]) {
                let pfn = zone.alloc_pages_boot(&mut frames, 0);
                let pfn = pfn.expect("a lower zone's pages are part of the node's capacity");
                frames.get_mut(pfn).flags =
                    crate::mm::page::pg::USED | crate::mm::page::pg::RESERVED;
                set_aside[n].push(pfn);
            }
            // Free pages already on the CPUs' lists when the workload starts (boot_pcp_*).
            let node = &m.nodes[n];
            for cpu in 0..node.boot_pcp_count.len().max(node.boot_pcp_high.len()) {
                let count = node.boot_pcp_count.get(cpu).copied().unwrap_or(0);
                let high = node.boot_pcp_high.get(cpu).copied().unwrap_or(0);
                zone.fill_pcp(&mut frames, cpu, count, high);
            }
            // Boot's allocations were made before the workload's time 0: they hold no lock
            // in its timeline.
            zone.lock = Default::default();
        }
        let nnodes = m.nodes.len();
        let mut nodes = Vec::new();
        for (n, zone) in zones.into_iter().enumerate() {
            // build_zonelists: nodes by increasing distance, ties by node id.
            let mut order: Vec<u8> = (0..nnodes as u8).collect();
            order.sort_by_key(|&o| (cfg.distance(n, o as usize), o));
            nodes.push(Pgdat {
                node_id: n as u8,
                zone,
                lower_free_target: set_aside[n].len(),
                lower_free: std::mem::take(&mut set_aside[n]),
                lru: Default::default(),
                cpus: node_cpus[n].clone(),
                zonelist: order,
                kswapd_awake: false,
                kswapd_failures: 0,
                nr_isolated: 0,
                nr_anon: 0,
                nr_file: 0,
                nr_anon_thps: 0,
                deferred_split: Vec::new(),
                kswapd_short_sleep_until: 0,
                numab: Default::default(),
                kswapd_pass: Default::default(),
                anon_cost: 0,
                file_cost: 0,
                kswapd_prev_cpu: m.nodes[n].kswapd_cpu,
                kswapd_recent_cpu: None,
                kswapd_waiting: false,
                nr_demoted: 0,
                demote_wmark: 0,
                lrugen: crate::mm::lru_gen::LruGenFolio::new(cfg.vm.lru_gen_enabled),
            });
        }

        let mut k = Kernel {
            nodes,
            frames,
            mms: (0..nproc).map(|i| Mm::new(i, i)).collect(),
            anon_vmas: crate::mm::rmap::AnonVmas::for_mms(nproc),
            sockets: Default::default(),
            files: files
                .iter()
                .map(|f| PageCacheFile::new(&f.name, f.pages, f.shmem))
                .collect(),
            vm: VmCounters::default(),
            tiers: MemoryTiers::new(&cfg),
            zero_pfn,
            huge_zero_pfn: None,
            tlb_ubc: Default::default(),
            migrc: Default::default(),
            arch,
            policy: Some((policy.new)()),
            sched: Scheduler::new(ncpus, nproc as usize),
            timers: Timers::default(),
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(cfg.scenario.seed),
            checker: Checker::new(cfg.sim.check_level()),
            pageout_kept_no_swap: 0,
            numa_scan_trace: cfg.sim.trace_numa_scan.then(Vec::new),
            swap_migration_ad_supported: crate::mm::swapfile::swap_migration_ad_supported(&cfg),
            swap: crate::mm::swapfile::SwapAreas::new(&cfg),
            cfg,
        };
        k.setup_demote_wmarks();
        Ok(k)
    }
}

impl Zone {
    /// deferred_grow_zone() → deferred_init_maxorder(): pull the zone's next deferred
    /// max-order blocks, up to the end of the first one's section, onto the tail of
    /// free_area[MAX_PAGE_ORDER], initialising their sections (deferred_init_memmap). They
    /// were counted free from boot, so NR_FREE_PAGES does not change. Returns whether any
    /// block was left to pull.
    pub fn deferred_grow_zone(&mut self, frames: &mut FrameTable) -> bool {
        use crate::mm::page::pg;
        use crate::mm::page_alloc::MAX_PAGE_ORDER;
        use crate::mm::sparse::PFN_SECTION_SHIFT;
        if self.first_deferred >= self.deferred_end {
            return false;
        }
        let block = 1u64 << MAX_PAGE_ORDER;
        let first = self.start_pfn as u64 + self.first_deferred;
        // in u64: the last section of a 16 TiB machine ends at 2^32
        let section_end = ((first >> PFN_SECTION_SHIFT) + 1) << PFN_SECTION_SHIFT;
        loop {
            let pfn = (self.start_pfn as u64 + self.first_deferred) as u32;
            frames.init_range(pfn, pfn + block as u32);
            let p = frames.get_mut(pfn);
            p.flags |= pg::BUDDY;
            p.order = MAX_PAGE_ORDER as u8;
            frames.list_add_tail(&mut self.free_area[MAX_PAGE_ORDER], pfn);
            self.first_deferred += block;
            let next = self.start_pfn as u64 + self.first_deferred;
            if self.first_deferred >= self.deferred_end || next >= section_end {
                return true;
            }
        }
    }

    /// Free pages still deferred: on no free list yet, but counted in NR_FREE_PAGES.
    pub fn nr_deferred_pages(&self) -> u64 {
        self.deferred_end - self.first_deferred
    }
}
