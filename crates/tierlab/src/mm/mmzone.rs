//! Per-node state (`pg_data_t`, include/linux/mmzone.h): the node's zone, its LRU lists
//! (`struct lruvec`) and its kswapd.

use crate::mm::page::ListHead;
use crate::mm::page_alloc::Zone;

/// enum lru_list order.
pub const LRU_INACTIVE_ANON: usize = 0;
pub const LRU_ACTIVE_ANON: usize = 1;
pub const LRU_INACTIVE_FILE: usize = 2;
pub const LRU_ACTIVE_FILE: usize = 3;
pub const NR_LRU_LISTS: usize = 4;
pub const LRU_NAMES: [&str; NR_LRU_LISTS] = [
    "nr_inactive_anon",
    "nr_active_anon",
    "nr_inactive_file",
    "nr_active_file",
];

/// lru_list index for a page: file pages are on the file lists, active pages on the active ones.
#[inline]
pub fn lru_index(anon: bool, active: bool) -> usize {
    (if anon { 0 } else { 2 }) + active as usize
}

pub struct Pgdat {
    pub node_id: u8,
    pub zone: Zone,
    /// The free pages of the zones below `zone` (ZONE_DMA, ZONE_DMA32 on x86-64) that their
    /// lowmem_reserve keeps from user allocations (mm/lowmem_reserve.rs): frames set aside,
    /// flagged reserved; only allocations that ignore watermarks take them, and frees refill
    /// them up to `lower_free_target`.
    pub lower_free: Vec<u32>,
    pub lower_free_target: usize,
    pub lru: [ListHead; NR_LRU_LISTS],
    /// CPUs of this node (empty: a memory-only node).
    pub cpus: Vec<u32>,
    /// Fallback order for allocations starting here (build_zonelists: by distance).
    pub zonelist: Vec<u8>,
    /// kswapd is running or scheduled (kswapd_wait is active).
    pub kswapd_awake: bool,
    /// kswapd_failures (MAX_RECLAIM_RETRIES = 16 stops wakeups).
    pub kswapd_failures: u32,
    /// Isolated pages (nr_isolated_anon + nr_isolated_file).
    pub nr_isolated: u64,
    pub nr_anon: u64,
    pub nr_file: u64,
    /// NR_ANON_THPS in THPs: anon THPs on the node, mapped by huge PMDs.
    pub nr_anon_thps: u64,
    /// The deferred split queue: per partly unmapped THP, its unmapped pages, still
    /// allocated until deferred_split_scan runs.
    pub deferred_split: Vec<Vec<u32>>,
    /// The end of kswapd's short sleep (kswapd_try_to_sleep's HZ/10), 0 outside one.
    pub kswapd_short_sleep_until: u64,
    /// The CPU kswapd runs on, or last ran on (task_cpu), if it has run.
    pub kswapd_prev_cpu: Option<u32>,
    /// kswapd's p->recent_used_cpu (select_idle_sibling).
    pub kswapd_recent_cpu: Option<u32>,
    /// kswapd was woken and has not run since: it waits on its CPU's run queue, the one
    /// state in which a load balance can move it (can_migrate_task refuses the running task).
    pub kswapd_waiting: bool,
    /// NUMA-balancing promotion state (nbp_* fields) and per-node tiering counters.
    pub numab: crate::mm::numa_balancing::NumaBalancingNode,
    /// kswapd's balance_pgdat run in progress.
    pub kswapd_pass: crate::mm::vmscan::ShrinkPass,
    /// lruvec->anon_cost and file_cost: recent reclaim cost of each type (lru_note_cost),
    /// which get_scan_count's SCAN_FRACT split weighs against.
    pub anon_cost: u64,
    pub file_cost: u64,
    /// Pages demoted from this node (its pgdemote_* node counters, summed).
    pub nr_demoted: u64,
    /// TPP's WMARK_DEMOTE for a top-tier node (0: not in use).
    pub demote_wmark: u64,
    /// The multi-generational LRU of the node's lruvec (lruvec->lrugen, CONFIG_LRU_GEN).
    pub lrugen: crate::mm::lru_gen::LruGenFolio,
}

impl Pgdat {
    /// lruvec_page_state(NR_*_LRU): with MGLRU the two youngest generations count as active
    /// (lru_gen_update_size, lru_gen_is_active).
    pub fn lru_size(&self, lru: usize) -> u64 {
        if self.lrugen.enabled {
            return self.lrugen.lru_size(lru);
        }
        self.lru[lru].len as u64
    }
}
