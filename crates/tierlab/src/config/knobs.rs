//! The kernel's knobs (`[vm]`, `[kernel]`, `[x86]`) and the simulator's own settings
//! (`[scenario]`, `[sim]`, `[debug]`), one declaration each. Ranges are the kernel's own bounds
//! where it has them; a tierlab bound says why in its source.

use super::knob::{enum_knob_value, knob_table, Range, INT_MAX, TIERLAB, UINT_MAX};
use serde::{Deserialize, Serialize};

knob_table! {
    /// `[scenario]`: what the run is called and the seed of every random choice.
    pub struct ScenarioMeta {
        /// Name printed in reports.
        name: String = "unnamed".into(),
            path: TIERLAB, range: Range::Any, source: "tierlab";
        /// Free text describing the scenario.
        description: String = String::new(),
            path: TIERLAB, range: Range::Any, source: "tierlab";
        /// Seed of every random choice in the run.
        seed: u64 = 42,
            path: TIERLAB, range: Range::Any, source: "tierlab";
    }
}

knob_table! {
    /// `/proc/sys/vm/*` knobs.
    pub struct VmSysctl {
        /// Reserve that sets the min watermark, KiB; 0 = the kernel's calculate_min_free_kbytes().
        /// The kernel takes 0 literally; tierlab uses it for "the boot-time default".
        min_free_kbytes: u64 = 0,
            path: "/proc/sys/vm/min_free_kbytes",
            range: Range::Int(0, INT_MAX),
            source: "mm/page_alloc.c page_alloc_sysctl_table: min_free_kbytes_sysctl_handler, extra1 = SYSCTL_ZERO";
        /// Gap between the min, low and high watermarks, in 1/10000 of the zone.
        watermark_scale_factor: u32 = 10,
            path: "/proc/sys/vm/watermark_scale_factor",
            range: Range::Int(1, 3000),
            source: "mm/page_alloc.c page_alloc_sysctl_table: extra1 = SYSCTL_ONE, extra2 = SYSCTL_THREE_THOUSAND";
        /// Per-CPU pageset high as a fraction of the zone; 0 = auto-tuned.
        /// Otherwise fixed: high = managed pages / fraction / CPUs.
        percpu_pagelist_high_fraction: u32 = 0,
            path: "/proc/sys/vm/percpu_pagelist_high_fraction",
            range: Range::ZeroOr(8, INT_MAX),
            source: "mm/page_alloc.c percpu_pagelist_high_fraction_sysctl_handler: 0 or >= MIN_PERCPU_PAGELIST_HIGH_FRACTION (8)";
        /// How much of Huang Ying's "mm: PCP high auto-tuning" series (seed 002, v2,
        /// <20230926060911.266511-1-ying.huang@intel.com>) the page allocator has: `base` (6.6),
        /// or `patchN`, patches 1 to N: 1 drains only on a second consecutive high-order free;
        /// 2 (cacheinfo) and 3 keep a batch when the CPU's data cache holds it; 4 caps the
        /// batch scale; 5 scales allocation batches; 6 (high_min/high_max, no behaviour) and 7
        /// tune high, decayed by vmstat; 8 shrinks it below the high watermark; 9 decays by
        /// the list's minimum; 10 counts consecutive frees. `merged` is what Linux 6.7 took
        /// (v3: v2 without patch 9), the default. The seed's tables measure base, 1, 3, 5, 7,
        /// 9 and 10.
        pcp_series: PcpSeries = PcpSeries::Merged,
            path: TIERLAB,
            range: Range::OneOf(&PcpSeries::NAMES),
            source: "seed 002 (v2 cover letter); merged as commits ca71fe1ad922..6ccdcb6d3a74 in 6.7";
        /// log2 of the pages swap readahead reads at most (swap_vma_readahead's window).
        page_cluster: u32 = 3,
            path: "/proc/sys/vm/page-cluster",
            range: Range::Int(0, 31),
            source: "mm/swap.c swap_sysctl_table: extra1 = SYSCTL_ZERO, extra2 = &page_cluster_max (31)";
        /// Anon share of reclaim scanning (get_scan_count's SCAN_FRACT split).
        swappiness: u32 = 60,
            path: "/proc/sys/vm/swappiness",
            range: Range::Int(0, 200),
            source: "mm/vmscan.c vmscan_sysctl_table (kernel/sysctl.c vm_table before 2024): extra1 = SYSCTL_ZERO, extra2 = SYSCTL_TWO_HUNDRED";
        /// Demote cold pages to a slower tier instead of reclaiming them (numa_demotion_enabled).
        demotion_enabled: bool = false,
            path: "/sys/kernel/mm/numa/demotion_enabled",
            range: Range::Any,
            source: "mm/memory-tiers.c demotion_enabled_store: kstrtobool";
        /// Reclaim with the multi-generational LRU (MGLRU) instead of the two-list LRU.
        /// Off is kernel.org's default (CONFIG_LRU_GEN_ENABLED=n); Debian's 6.12 turns it on.
        lru_gen_enabled: bool = false,
            path: "/sys/kernel/mm/lru_gen/enabled",
            range: Range::Any,
            source: "mm/vmscan.c enabled_store: \"y\"/\"n\" or a caps mask (kstrtouint); tierlab's true is \"y\" (every cap)";
        /// MGLRU working-set protection: the age the oldest generation must reach, ms; 0 = off.
        /// When it is younger, kswapd's lru_gen_age_node calls the OOM killer; tierlab has none
        /// and only counts the call per node (`lrugen.oom_kills`). Needs vm.lru_gen_enabled.
        lru_gen_min_ttl_ms: u64 = 0,
            path: "/sys/kernel/mm/lru_gen/min_ttl_ms",
            range: Range::Int(0, UINT_MAX),
            source: "mm/vmscan.c min_ttl_ms_store: kstrtouint";
        /// Transparent huge pages for anonymous memory: `always` (every anon VMA with an
        /// aligned 2 MiB range, unless MADV_NOHUGEPAGE), `madvise` (only MADV_HUGEPAGE ranges)
        /// or `never`. The kernel's Kconfig default and Debian's 6.12 are `always`; tierlab
        /// keeps `never` as its default so results stay comparable with a THP-off kernel.
        transparent_hugepage_enabled: ThpEnabled = ThpEnabled::Never,
            path: "/sys/kernel/mm/transparent_hugepage/enabled",
            range: Range::OneOf(&["always", "madvise", "never"]),
            source: "mm/huge_memory.c enabled_store; Kconfig TRANSPARENT_HUGEPAGE_ALWAYS";
        /// How hard a THP fault tries for an order-9 block (vma_thp_gfp_mask): `always`
        /// (direct reclaim), `defer` (wake kswapd), `defer+madvise`, `madvise` (direct reclaim
        /// for MADV_HUGEPAGE ranges only, the default) or `never` (free blocks only). tierlab
        /// has no compaction: reclaim frees pages, it does not assemble blocks.
        transparent_hugepage_defrag: ThpDefrag = ThpDefrag::Madvise,
            path: "/sys/kernel/mm/transparent_hugepage/defrag",
            range: Range::OneOf(&["always", "defer", "defer+madvise", "madvise", "never"]),
            source: "mm/huge_memory.c defrag_store; default TRANSPARENT_HUGEPAGE_REQ_MADV_FLAG";
        /// A read fault in a THP range maps the huge zero page (do_huge_pmd_anonymous_page).
        transparent_hugepage_use_zero_page: bool = true,
            path: "/sys/kernel/mm/transparent_hugepage/use_zero_page",
            range: Range::Any,
            source: "mm/huge_memory.c use_zero_page_store: kstrtoul, default on";
        /// Pages come zeroed from the allocator (post_alloc_hook), the init_on_alloc boot
        /// parameter; Debian's 6.12 is built with CONFIG_INIT_ON_ALLOC_DEFAULT_ON. Modelled only
        /// where it costs: 6.12's THP fault clears the zeroed folio again (folio_zero_user).
        init_on_alloc: bool = false,
            path: TIERLAB,
            range: Range::Any,
            source: "mm/mm_init.c early_init_on_alloc (boot parameter init_on_alloc=); mm/huge_memory.c __do_huge_pmd_anonymous_page";
        /// TPP's demotion watermark above high on top-tier nodes, in 1/10000 of the node; 0 = off.
        /// TPP's default is 200 (2 %); kswapd demotes until free pages exceed it. Not upstream.
        demote_scale_factor: u32 = 0,
            path: "/proc/sys/vm/demote_scale_factor",
            range: Range::Int(0, 10000),
            source: "TPP patch series (seed 003) vm_table: demote_scale_factor_sysctl_handler, extra1 = 1, extra2 = 10000; 0 (off) is tierlab's";
    }
}

knob_table! {
    /// `/proc/sys/kernel/*` knobs and the scheduler's debugfs knobs.
    pub struct KernelSysctl {
        /// EEVDF base time slice, ns.
        sched_base_slice_ns: u64 = 750_000,
            path: "/sys/kernel/debug/sched/base_slice_ns",
            range: Range::Int(0, UINT_MAX),
            source: "kernel/sched/debug.c sched_init_debug: debugfs_create_u32, no bounds";
        /// NUMA balancing mode bits: 1 NUMA_BALANCING_NORMAL, 2 NUMA_BALANCING_MEMORY_TIERING.
        /// 4 is accepted by the kernel and sets no mode bit: the scanner runs, nothing moves.
        numa_balancing: u32 = 0,
            path: "/proc/sys/kernel/numa_balancing",
            range: Range::Int(0, 4),
            source: "kernel/sched/core.c sched_core_sysctls: sysctl_numa_balancing, extra1 = SYSCTL_ZERO, extra2 = SYSCTL_FOUR";
        /// Promotion rate limit of memory-tiering mode, MB/s.
        #[serde(rename = "numa_balancing_promote_rate_limit_MBps")]
        numa_balancing_promote_rate_limit_mbps: u64 = 65536,
            path: "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps",
            range: Range::Int(0, INT_MAX),
            source: "kernel/sched/fair.c sched_fair_sysctls: proc_dointvec_minmax, extra1 = SYSCTL_ZERO";
        /// Delay before a new task's first NUMA scan, ms.
        numa_balancing_scan_delay_ms: u64 = 1000,
            path: "/sys/kernel/debug/sched/numa_balancing/scan_delay_ms",
            range: Range::Int(0, UINT_MAX),
            source: "kernel/sched/debug.c sched_init_debug: debugfs_create_u32, no bounds";
        /// Shortest NUMA scan period, ms.
        numa_balancing_scan_period_min_ms: u64 = 1000,
            path: "/sys/kernel/debug/sched/numa_balancing/scan_period_min_ms",
            range: Range::Int(0, UINT_MAX),
            source: "kernel/sched/debug.c sched_init_debug: debugfs_create_u32, no bounds; tierlab also needs it <= scan_period_max_ms";
        /// Longest NUMA scan period, ms; also the promotion threshold's adjustment period.
        numa_balancing_scan_period_max_ms: u64 = 60000,
            path: "/sys/kernel/debug/sched/numa_balancing/scan_period_max_ms",
            range: Range::Int(0, UINT_MAX),
            source: "kernel/sched/debug.c sched_init_debug: debugfs_create_u32, no bounds";
        /// Address space marked PROT_NONE per scan, MB.
        numa_balancing_scan_size_mb: u64 = 256,
            path: "/sys/kernel/debug/sched/numa_balancing/scan_size_mb",
            range: Range::Int(1, UINT_MAX),
            source: "kernel/sched/debug.c debugfs_create_u32 takes 0, but task_scan_min() divides by it; the sysctl it replaced (kernel/sysctl.c, before v5.13) had extra1 = SYSCTL_ONE";
        /// Hint-fault latency below which a slow-tier page counts as hot, ms.
        numa_balancing_hot_threshold_ms: u64 = 1000,
            path: "/sys/kernel/debug/sched/numa_balancing/hot_threshold_ms",
            range: Range::Int(0, UINT_MAX),
            source: "kernel/sched/debug.c sched_init_debug: debugfs_create_u32, no bounds";
        /// MIGRC: defer the TLB flush of read-only migrated folios until their frames are reused.
        /// Not upstream; off by default. Accepts true/false or "on"/"off".
        #[serde(deserialize_with = "super::knob::on_off")]
        migrc: bool = false,
            path: TIERLAB,
            range: Range::Any,
            source: "MIGRC v9 patch series (seed 000), CONFIG_MIGRC; not upstream";
        /// Migration entries keep the PTE's young and dirty bits (when the swap offset has room
        /// for them, migration_entry_supports_ad), so a migrated page comes back young and
        /// dirty as it was. Upstream since 6.1; false models earlier kernels (old and clean).
        migration_entry_ad: bool = true,
            path: TIERLAB,
            range: Range::Any,
            source: "mm: Remember young/dirty bit for page migrations (2e3468778dbe, v6.1; seed 004)";
        /// TPP: promote a slow-tier page on a hint fault only if it is on the active LRU.
        /// Otherwise mark it accessed so a later fault promotes it; replaces mode 2's hot-threshold
        /// test. Off by default. Accepts true/false or "on"/"off".
        #[serde(deserialize_with = "super::knob::on_off")]
        numa_balancing_active_lru_promotion: bool = false,
            path: TIERLAB,
            range: Range::Any,
            source: "TPP patch series (seed 003): promote only active-LRU pages; not upstream";
        /// Memory-tiering policy deciding promotions: "linux" (upstream hot threshold) or
        /// "tpp"; selecting one applies its knob defaults (tpp: demote_scale_factor 200,
        /// active-LRU promotion on).
        tiering_policy: String = "linux".into(),
            path: TIERLAB,
            range: Range::Any,
            source: "tierlab policy/ registry (policy::POLICIES); an unknown name lists the registered ones";
    }
}

/// NUMA_BALANCING_NORMAL / NUMA_BALANCING_MEMORY_TIERING bits of kernel.numa_balancing.
pub const NUMA_BALANCING_NORMAL: u32 = 1;
pub const NUMA_BALANCING_MEMORY_TIERING: u32 = 2;

knob_table! {
    /// x86 debugfs knobs (`/sys/kernel/debug/x86/*`).
    pub struct X86Knobs {
        /// Largest range flushed page by page (INVLPG); larger ranges flush the whole TLB.
        tlb_single_page_flush_ceiling: u32 = 33,
            path: "/sys/kernel/debug/x86/tlb_single_page_flush_ceiling",
            range: Range::Int(0, INT_MAX),
            source: "arch/x86/mm/tlb.c tlbflush_write_file: kstrtoint, rejects ceiling < 0";
        /// L1TF mitigation (kernel command line `l1tf=`). On a CPU with the bug, any setting
        /// but "off" caps the swap offset at half the physical address space
        /// (arch_max_swapfile_size), which may leave no room for A/D bits in migration entries.
        l1tf: String = "flush".into(),
            path: "kernel command line l1tf=",
            range: Range::OneOf(&["off", "flush,nowarn", "flush", "flush,nosmt", "full", "full,force"]),
            source: "arch/x86/kernel/cpu/bugs.c l1tf_cmdline; Documentation/admin-guide/hw-vuln/l1tf.rst (default flush)";
    }
}

knob_table! {
    /// `[arch]`: how the architecture's TLB flushing is built (kernel configuration and
    /// CPU errata), for both architectures.
    pub struct ArchKnobs {
        /// Batch the TLB flush of pages unmapped by reclaim and migration
        /// (CONFIG_ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH): x86 since 4.3, arm64 since 6.5 (seed
        /// 001). False flushes every page as it is unmapped (ptep_clear_flush).
        batched_unmap_flush: bool = true,
            path: TIERLAB,
            range: Range::Any,
            source: "mm/rmap.c should_defer_flush; arm64: 43b3dfdd0455 (seed 001)";
        /// arm64 ARM64_WORKAROUND_REPEAT_TLBI (Falkor erratum 1009, Cortex-A76 erratum
        /// 1286807): TLBIs are repeated after a DSB, and batching is refused.
        repeat_tlbi_erratum: bool = false,
            path: TIERLAB,
            range: Range::Any,
            source: "arch/arm64/include/asm/tlbflush.h arch_tlbbatch_should_defer";
        /// arm64 ASID width (ID_AA64MMFR0_EL1.ASIDBits): 16 on the Cortex-A7x/X1 and
        /// TaiShan cores of the seed's machines, 8 on some older cores.
        asid_bits: u32 = 16,
            path: TIERLAB,
            range: Range::Rule("8 or 16"),
            source: "arch/arm64/mm/context.c get_cpu_asid_bits";
        /// arm64 KPTI (arm64_kernel_unmapped_at_el0, for Meltdown-affected cores or kpti=1):
        /// each mm takes an even/odd ASID pair, halving the ASIDs per generation.
        kpti: bool = false,
            path: TIERLAB,
            range: Range::Any,
            source: "arch/arm64/mm/context.c set_kpti_asid_bits";
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckLevel {
    /// No invariant checking.
    Off,
    /// The TLB check at every timeline sample, the bookkeeping checks (frames, rmap, LRU,
    /// swap) once per 8 accesses per frame and PTE, and everything at the end.
    Periodic,
    /// Periodic checks plus a TLB scan on every frame allocation (tests, small machines).
    Strict,
}

/// A level of the PCP high auto-tuning series (seed 002, v2), ordered as the patches apply:
/// `PatchN` has patches 1..=N.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PcpSeries {
    Base,
    Patch1,
    Patch2,
    Patch3,
    Patch4,
    Patch5,
    Patch6,
    Patch7,
    Patch8,
    Patch9,
    Patch10,
    #[default]
    Merged,
}

impl PcpSeries {
    /// Every level, in order.
    pub const ALL: [PcpSeries; 12] = [
        PcpSeries::Base,
        PcpSeries::Patch1,
        PcpSeries::Patch2,
        PcpSeries::Patch3,
        PcpSeries::Patch4,
        PcpSeries::Patch5,
        PcpSeries::Patch6,
        PcpSeries::Patch7,
        PcpSeries::Patch8,
        PcpSeries::Patch9,
        PcpSeries::Patch10,
        PcpSeries::Merged,
    ];

    /// The names the knob takes, in order.
    pub const NAMES: [&'static str; 12] = [
        "base", "patch1", "patch2", "patch3", "patch4", "patch5", "patch6", "patch7", "patch8",
        "patch9", "patch10", "merged",
    ];

    /// Whether patch `n` of v2 (1..=10) is applied (`merged` has all but 9).
    pub fn has(self, n: u32) -> bool {
        match self {
            PcpSeries::Merged => n != 9,
            level => n <= level as u32,
        }
    }

    /// The name the knob takes.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// /sys/kernel/mm/transparent_hugepage/enabled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThpEnabled {
    Always,
    Madvise,
    #[default]
    Never,
}

/// /sys/kernel/mm/transparent_hugepage/defrag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThpDefrag {
    Always,
    Defer,
    #[serde(rename = "defer+madvise")]
    DeferMadvise,
    #[default]
    Madvise,
    Never,
}

enum_knob_value!(CheckLevel, MigrcBreak, TlbBreak, PcpSeries, ThpEnabled, ThpDefrag);

knob_table! {
    /// `[sim]`: the simulation engine.
    pub struct SimConfig {
        /// Stop after this much simulated time, s; 0 = run until every thread exits.
        max_seconds: f64 = 0.0,
            path: TIERLAB, range: Range::between(0.0, 1e6),
            source: "tierlab: simulated time counts cycles in a u64 (29 years at 20 GHz); 1e6 s (11.6 days) stays far from it";
        /// How far one CPU may run ahead before the engine switches to the CPU behind, ns.
        quantum_ns: f64 = 5000.0,
            path: TIERLAB, range: Range::between(1.0, 1e9),
            source: "tierlab: under 1 ns the engine switches CPUs every cycle; over 1 s one CPU runs alone";
        /// Timeline sampling interval (simulated), ms.
        timeline_interval_ms: f64 = 100.0,
            path: TIERLAB, range: Range::between(0.01, 3.6e6),
            source: "tierlab: each sample holds every node and region, so below 10 µs the timeline outgrows the run; an hour is the longest useful";
        /// Record the NUMA scanner's events (task_numa_work, change_prot_numa,
        /// sched_skip_vma_numa) in the result's `numa_scan_trace`.
        trace_numa_scan: bool = false,
            path: TIERLAB, range: Range::Any, source: "tierlab mm/numa_scan_trace.rs";
        /// Invariant checking; unset = strict in debug builds, periodic in release builds.
        check: Option<CheckLevel> = None,
            path: TIERLAB,
            range: Range::OneOf(&["off", "periodic", "strict"]),
            source: "tierlab check.rs";
    }
}

impl SimConfig {
    pub fn check_level(&self) -> CheckLevel {
        self.check.unwrap_or(if cfg!(debug_assertions) {
            CheckLevel::Strict
        } else {
            CheckLevel::Periodic
        })
    }
}

/// Test-only ways to break MIGRC, to prove the invariant checker catches each hazard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrcBreak {
    #[default]
    None,
    /// Skip the deferred flush when a marked frame leaves pcp/buddy.
    AllocFlush,
    /// Skip the give-up flush when a read-only PTE becomes writable.
    UpgradeFlush,
    /// Skip munmap's TLB flush (the LUF pte_none hazard Dave Hansen raised).
    MunmapFlush,
    /// Skip exit_mmap's TLB flushes: an exiting process's frames are freed while CPUs may
    /// still translate to them (the LUF reviewers' exit case).
    ExitFlush,
}

/// Test-only ways to break the batched unmap flush, to prove the checker catches it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TlbBreak {
    #[default]
    None,
    /// arch_tlbbatch_flush does nothing: no IPIs on x86, no DSB on arm64 (the TLBIs already
    /// issued never complete), and the unmapped frames are freed anyway.
    SkipBatchedFlush,
    /// arm64: a CPU switching after an ASID rollover keeps its TLB (no local_flush_tlb_all),
    /// so an ASID handed to a new mm still names the old one's entries there.
    SkipRolloverFlush,
}

knob_table! {
    /// `[debug]`: test-only switches (deliberate breakage for checker tests).
    pub struct DebugConfig {
        /// Break one MIGRC flush on purpose, to prove the invariant checker catches it.
        migrc_break: MigrcBreak = MigrcBreak::None,
            path: TIERLAB,
            range: Range::OneOf(&["none", "alloc_flush", "upgrade_flush", "munmap_flush", "exit_flush"]),
            source: "tierlab tests (migrc.rs)";
        /// Break the batched unmap flush on purpose (either architecture).
        tlb_break: TlbBreak = TlbBreak::None,
            path: TIERLAB,
            range: Range::OneOf(&["none", "skip_batched_flush"]),
            source: "tierlab tests (arm64.rs)";
        /// Skip the TLB flush of a huge PMD split (pmdp_invalidate's flush_pmd_tlb_range), to
        /// prove the checker catches a 2 MiB entry left over a range now mapped by PTEs.
        thp_split_skip_flush: bool = false,
            path: TIERLAB, range: Range::Any, source: "tierlab tests (thp.rs)";
    }
}
