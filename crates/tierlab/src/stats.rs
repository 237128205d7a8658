//! Counters under the kernel's own names: `/proc/vmstat` events and node items
//! (mm/vmstat.c `vmstat_text`), `perf` TLB events and `/proc/interrupts` rows.

use serde_json::{Map, Value};

macro_rules! counters {
    ($(#[$m:meta])* $enum:ident, $names:ident, { $($var:ident => $name:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum $enum { $($var),* }
        impl $enum {
            pub const COUNT: usize = [$($name),*].len();
            pub const ALL: [$enum; Self::COUNT] = [$($enum::$var),*];
            pub fn name(self) -> &'static str { $names[self as usize] }
        }
        pub const $names: [&str; $enum::COUNT] = [$($name),*];
    };
}

counters!(
    /// `/proc/vmstat` event counters (vm_event_item) and the node items tierlab models.
    Vm, VM_NAMES, {
    PgFault => "pgfault",
    PgMajFault => "pgmajfault",
    Pswpin => "pswpin",
    Pswpout => "pswpout",
    SwapRa => "swap_ra",
    SwapRaHit => "swap_ra_hit",
    PgAllocNormal => "pgalloc_normal",
    PgFree => "pgfree",
    PgActivate => "pgactivate",
    PgDeactivate => "pgdeactivate",
    PgRefill => "pgrefill",
    PgScanKswapd => "pgscan_kswapd",
    PgScanDirect => "pgscan_direct",
    PgStealKswapd => "pgsteal_kswapd",
    PgStealDirect => "pgsteal_direct",
    PgScanAnon => "pgscan_anon",
    PgScanFile => "pgscan_file",
    PgStealAnon => "pgsteal_anon",
    PgStealFile => "pgsteal_file",
    PageOutRun => "pageoutrun",
    AllocStallNormal => "allocstall_normal",
    KswapdLowWmarkHitQuickly => "kswapd_low_wmark_hit_quickly",
    KswapdHighWmarkHitQuickly => "kswapd_high_wmark_hit_quickly",
    NumaHit => "numa_hit",
    NumaMiss => "numa_miss",
    NumaForeign => "numa_foreign",
    NumaLocal => "numa_local",
    NumaOther => "numa_other",
    PgPgIn => "pgpgin",
    NrTlbRemoteFlush => "nr_tlb_remote_flush",
    NrTlbRemoteFlushReceived => "nr_tlb_remote_flush_received",
    NrTlbLocalFlushAll => "nr_tlb_local_flush_all",
    NrTlbLocalFlushOne => "nr_tlb_local_flush_one",
    PgDemoteKswapd => "pgdemote_kswapd",
    PgDemoteDirect => "pgdemote_direct",
    PgPromoteSuccess => "pgpromote_success",
    PgPromoteCandidate => "pgpromote_candidate",
    PgMigrateSuccess => "pgmigrate_success",
    PgMigrateFail => "pgmigrate_fail",
    NumaPteUpdates => "numa_pte_updates",
    NumaHugePteUpdates => "numa_huge_pte_updates",
    NumaHintFaults => "numa_hint_faults",
    NumaHintFaultsLocal => "numa_hint_faults_local",
    NumaPagesMigrated => "numa_pages_migrated",
    MigrcDeferred => "migrc_deferred",
    MigrcDeferredBatches => "migrc_deferred_batches",
    MigrcIpisDeferred => "migrc_ipis_deferred",
    MigrcFlushAlloc => "migrc_flush_alloc",
    MigrcFlushUpgrade => "migrc_flush_upgrade",
    MigrcFlushPause => "migrc_flush_pause",
    MigrcFlushIpis => "migrc_flush_ipis",
    MigrcPause => "migrc_pause",
    PgPromoteAnon => "pgpromote_anon",
    PgPromoteFile => "pgpromote_file",
    PgPromoteFailAnon => "pgpromote_fail_anon",
    PgPromoteFailFile => "pgpromote_fail_file",
    PgDemoteAnon => "pgdemote_anon",
    PgDemoteFile => "pgdemote_file",
    ThpFaultAlloc => "thp_fault_alloc",
    ThpFaultFallback => "thp_fault_fallback",
    ThpSplitPage => "thp_split_page",
    ThpDeferredSplitPage => "thp_deferred_split_page",
    ThpSplitPmd => "thp_split_pmd",
    ThpMigrationSuccess => "thp_migration_success",
    ThpMigrationFail => "thp_migration_fail",
    ThpMigrationSplit => "thp_migration_split",
    ThpZeroPageAlloc => "thp_zero_page_alloc",
});

counters!(
    /// `perf stat` events (Intel names where the seed used them).
    Perf, PERF_NAMES, {
    DtlbLoadMisses => "dTLB-load-misses",
    DtlbStoreMisses => "dTLB-store-misses",
    ItlbLoadMisses => "iTLB-load-misses",
    ItlbFlush => "itlb.itlb_flush",
    TlbFlushDtlbThread => "tlb_flush.dtlb_thread",
    TlbFlushStlbAny => "tlb_flush.stlb_any",
    StlbHits => "dtlb_load_misses.stlb_hit",
    PageWalks => "page_walks",
    AbitAssists => "accessed_bit_assists",
    DbitAssists => "dirty_bit_assists",
    Tlbi => "arm64.tlbi",
    TlbiCycles => "arm64.tlbi_cycles",
    DsbIsh => "arm64.dsb_ish",
    DsbIshCycles => "arm64.dsb_ish_cycles",
    AsidRollovers => "arm64.asid_rollovers",
});

/// Flat counter arrays: the hot path increments by index, never by name.
#[derive(Clone, Debug)]
pub struct Counters<const N: usize> {
    pub v: [u64; N],
}

impl<const N: usize> Default for Counters<N> {
    fn default() -> Self {
        Counters { v: [0; N] }
    }
}

pub type VmCounters = Counters<{ Vm::COUNT }>;
pub type PerfCounters = Counters<{ Perf::COUNT }>;

impl VmCounters {
    #[inline]
    pub fn inc(&mut self, c: Vm) {
        self.v[c as usize] += 1;
    }
    #[inline]
    pub fn add(&mut self, c: Vm, n: u64) {
        self.v[c as usize] += n;
    }
    #[inline]
    pub fn get(&self, c: Vm) -> u64 {
        self.v[c as usize]
    }
    pub fn to_json(&self) -> Value {
        named_json(&VM_NAMES, &self.v)
    }
}

impl PerfCounters {
    #[inline]
    pub fn inc(&mut self, c: Perf) {
        self.v[c as usize] += 1;
    }
    #[inline]
    pub fn add(&mut self, c: Perf, n: u64) {
        self.v[c as usize] += n;
    }
    #[inline]
    pub fn get(&self, c: Perf) -> u64 {
        self.v[c as usize]
    }
    pub fn merge(&mut self, other: &PerfCounters) {
        for (a, b) in self.v.iter_mut().zip(other.v.iter()) {
            *a += b;
        }
    }
    pub fn to_json(&self) -> Value {
        named_json(&PERF_NAMES, &self.v)
    }
}

fn named_json(names: &[&str], values: &[u64]) -> Value {
    let mut m = Map::new();
    for (n, v) in names.iter().zip(values) {
        m.insert((*n).to_string(), Value::from(*v));
    }
    Value::Object(m)
}

/// `/proc/interrupts` rows tierlab models, per CPU (arch/x86/kernel/irq.c).
#[derive(Clone, Debug, Default)]
pub struct IrqStat {
    /// irq_tlb_count: "TLB shootdowns".
    pub tlb: u64,
    /// irq_call_count: "Function call interrupts" (includes the TLB ones in current kernels).
    pub cal: u64,
}
