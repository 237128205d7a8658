//! Every cost the simulator charges, in CPU cycles or nanoseconds, with where the figure comes
//! from. Mechanism code reads these fields; it never writes a literal cost.
//! Each figure names its public source; [estimate] marks a figure with no primary measurement
//! that still needs calibration.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostTable {
    /// L1 dTLB/iTLB miss that hits the STLB: ~8 cycles (LIKWID TLB group notes) [estimate].
    pub stlb_hit_cycles: u32,
    /// A load or store that hits the per-CPU cache filter (L2 hit latency: 14 cycles on Zen 4,
    /// 16 on Golden Cove) [estimate: vendor optimisation manuals].
    pub cache_hit_cycles: u32,
    /// Page walk on an STLB miss: "about 25 cycles" penalty for 4 KiB pages (LIKWID); the
    /// walk's own PTE loads mostly hit the caches [estimate].
    pub page_walk_cycles: u32,
    /// Hardware setting of the Accessed bit on the first access through an old PTE: a
    /// user access right after a page fault took over 200 ns with the PTE old and about
    /// 70 ns with it made young by the fault handler (asterinas PR #1226, x86, CPU not
    /// named): ≈130 ns, ≈290 cycles at 2.2 GHz [estimate].
    pub accessed_bit_cycles: u32,
    /// Hardware setting of the Dirty bit on first write: "over 500 cycles" (Nadav Amit, linux-mm).
    pub dirty_bit_cycles: u32,
    /// Anonymous first-touch minor fault: median 3,241 cycles, Linux 6.6 (blog measurement).
    pub anon_fault_cycles: u32,
    /// File fault that finds the page in the page cache (minor) [estimate: a bit below anon,
    /// no zeroing].
    pub file_minor_fault_cycles: u32,
    /// File fault that must read the page (major fault): NVMe 4 KiB read ≈ 80 µs [estimate].
    pub file_major_fault_ns: u32,
    /// Write fault on a present read-only PTE of a writable VMA (do_wp_page reuse) [estimate].
    pub wp_fault_cycles: u32,
    /// Zeroing a 4 KiB page (clear_page with rep stosb, ~10 GB/s) [estimate].
    pub clear_page_cycles: u32,
    /// Taking a page from the per-CPU list (rmqueue_pcplist fast path) [estimate].
    pub pcp_alloc_cycles: u32,
    /// Returning a page to the per-CPU list (free_unref_page_commit) [estimate].
    pub pcp_free_cycles: u32,
    /// zone->lock hold: fixed part of one rmqueue_bulk / free_pcppages_bulk [estimate].
    pub zone_lock_base_cycles: u32,
    /// zone->lock hold: per page moved between buddy and a pageset (__rmqueue) [estimate].
    pub zone_lock_per_page_cycles: u32,
    /// Reclaim work per page scanned by shrink_folio_list (rmap walk, isolation) [estimate].
    pub reclaim_scan_cycles: u32,
    /// Extra work per clean page dropped (__remove_mapping, free) [estimate].
    pub reclaim_free_cycles: u32,
    /// x86 shootdown, initiator: ~2,150 cycles extra with one remote CPU
    /// (Nadav Amit, mprotect 2,499 vs 4,655 cycles on Haswell, linux-mm).
    pub ipi_send_cycles: u32,
    /// Initiator cost per additional remote CPU beyond the first [estimate].
    pub ipi_send_per_cpu_cycles: u32,
    /// Receiver: interrupt entry + flush_tlb_func + exit [estimate; no primary figure found].
    pub ipi_receive_cycles: u32,
    /// Local INVLPG of one page [estimate].
    pub invlpg_cycles: u32,
    /// Local full flush (CR3 write / INVPCID single-context) [estimate].
    pub full_flush_cycles: u32,
    /// arm64: issuing one broadcast TLBI (VALE1IS / ASIDE1IS) without waiting for it; the
    /// wait is the DSB's [estimate: a system-register write that queues a DVM message].
    pub tlbi_cycles: u32,
    /// arm64: DSB ISH waiting for broadcast TLBIs to complete, fixed part, ns. Eliding the
    /// flush of an mprotect'd page saved 0.35 µs of 3.2 µs (Dev Jain, "arm64/mm: Elide TLB
    /// flush in certain pte protection transitions", Arm, machine not named) [estimate].
    pub dsb_ish_base_ns: f64,
    /// arm64: DSB ISH wait per online CPU the broadcast reaches, ns: the TLBI's latency
    /// grows with the CPUs of the inner-shareable domain (Andrea Arcangeli, "arm64: tlb: skip
    /// tlbi broadcast"; seed 001's "bad scalability of tlb shootdown in HW") [estimate: with
    /// the base, ≈350 ns on 8 CPUs].
    pub dsb_ish_per_cpu_ns: f64,
    /// zram: compressing one 4 KiB page on swap-out, ns: lz4 compresses 780 MB/s (lz4
    /// README, Core i7-9700K, Silesia corpus), 5.3 µs a page [estimate: another CPU].
    pub zram_compress_ns: f64,
    /// zram: decompressing one page on swap-in, ns: lz4 decompresses 4,970 MB/s (lz4
    /// README), 0.82 µs a page [estimate: another CPU].
    pub zram_decompress_ns: f64,
    /// Swap bookkeeping per page, each way: slot allocation or free, swap_map and the
    /// swap-cache xarray [estimate].
    pub swap_slot_cycles: u32,
    /// Context switch between threads on a CPU (switch_mm with PCID, no flush) [estimate].
    pub context_switch_cycles: u32,
    /// mmap/munmap/mprotect system call fixed cost [estimate].
    pub syscall_cycles: u32,
    /// Per-page cost of zapping or changing a PTE in munmap/mprotect [estimate].
    pub pte_update_cycles: u32,
    /// Page migration work per 4 KiB page besides the copy (allocate, unmap to a migration
    /// entry, remap, free): mbind of 1 GiB took 1.7–2.5 µs per page end to end on AMD Milan, of which the copy is ~0.4 µs; ≈ 1.5 µs at 2.2 GHz [derived].
    pub migrate_page_cycles: u32,
    /// Single-thread copy bandwidth cap for migration (folio_mc_copy), GB/s: ~12 GB/s on
    /// SPR/Genoa single-thread read (Nomad, OSDI '24, Table 1); the slower node's own bandwidth
    /// applies when lower.
    pub migrate_copy_gbps: f64,
    /// NUMA hint fault entry/exit and do_numa_page bookkeeping [estimate: like a minor fault].
    pub numa_hint_fault_cycles: u32,
    /// change_prot_numa per PTE examined by task_numa_work: a page-table walk step plus
    /// vm_normal_folio and the prot_numa_skip checks, ~15 ns [estimate].
    pub numa_scan_pte_cycles: u32,
    /// MGLRU page-table walk (walk_pmd_range / walk_pte_range, lru_gen_look_around) per PMD
    /// or PTE entry examined: a read of the entry and the young/pfn checks, the same kind of
    /// step as change_prot_numa's [estimate: numa_scan_pte_cycles].
    pub lru_gen_walk_pte_cycles: u32,
    /// MGLRU per young PTE found by the walk: ptep_test_and_clear_young (a locked bit clear)
    /// plus folio_update_gen's cmpxchg on the folio's flags, likely a cache miss on the
    /// struct page [estimate: one atomic plus one miss, ~25 ns].
    pub lru_gen_update_gen_cycles: u32,
    /// Under `machine.vcpu_turns` only: a local APIC timer interrupt on a busy CPU up to the
    /// handler's re-arm of the tick (irq entry, hrtimer_interrupt, tick_sched_timer, then
    /// tick_program_event); charged to the interrupted thread's run time (Debian's 6.12 has
    /// no IRQ_TIME_ACCOUNTING) [measured in the guest, 1 instruction per ns: the re-arm's
    /// ktime, J' − delta / mult from `lapic_next_event`'s delta, 3,280 and 3,712 ns after
    /// the jiffy at the lower quartile of the ticks a reader's CPU took first in two traced
    /// runs; 3,500 is their mean].
    pub timer_interrupt_cycles: u32,
    /// A paced thread's clock_nanosleep(TIMER_ABSTIME) to a slot ahead, on its own run time:
    /// the syscall, hrtimer_start_range_ns, schedule() out and, once woken, back to user
    /// (hrtimer_nanosleep → do_nanosleep); the interrupt that wakes it runs in the idle
    /// task [measured by `tierlab validate`'s sleep probe in the guest; 0 elsewhere, where
    /// no figure for the hardware's round trip is cited: not charged].
    pub nanosleep_cycles: u32,
    /// The same call to a slot already past: its timer is programmed at the clockevent's
    /// minimum delta (clockevents_program_event) and the thread runs on once it fires
    /// [measured by the sleep probe; 0 elsewhere: not charged].
    pub nanosleep_past_cycles: u32,
    /// fork(2)'s fixed part: copy_process (task_struct, credentials, files, signal state,
    /// the scheduler's wake_up_new_task) without dup_mmap, whose VMAs and PTEs are charged
    /// per PTE (`pte_update_cycles`) [estimate: no primary figure for the split].
    pub fork_cycles: u32,
    /// execve(2)'s fixed part: opening and mapping the binary, a new mm and its stack
    /// (bprm_execve, exec_mmap) without the old mm's teardown (charged per page) and the
    /// new program's faults [estimate: no primary figure for the split].
    pub exec_cycles: u32,
    /// exit's fixed part without exit_mmap: do_exit's file, signal and task teardown and
    /// the parent's wake-up [estimate].
    pub exit_cycles: u32,
}

impl Default for CostTable {
    fn default() -> Self {
        CostTable {
            stlb_hit_cycles: 8,
            cache_hit_cycles: 14,
            page_walk_cycles: 25,
            accessed_bit_cycles: 290,
            dirty_bit_cycles: 500,
            anon_fault_cycles: 3241,
            file_minor_fault_cycles: 2000,
            file_major_fault_ns: 80_000,
            wp_fault_cycles: 1500,
            clear_page_cycles: 900,
            pcp_alloc_cycles: 60,
            pcp_free_cycles: 60,
            zone_lock_base_cycles: 200,
            zone_lock_per_page_cycles: 40,
            reclaim_scan_cycles: 300,
            reclaim_free_cycles: 200,
            ipi_send_cycles: 2150,
            ipi_send_per_cpu_cycles: 100,
            ipi_receive_cycles: 1000,
            invlpg_cycles: 100,
            full_flush_cycles: 200,
            tlbi_cycles: 20,
            dsb_ish_base_ns: 300.0,
            dsb_ish_per_cpu_ns: 6.0,
            zram_compress_ns: 5250.0,
            zram_decompress_ns: 820.0,
            swap_slot_cycles: 500,
            context_switch_cycles: 2000,
            syscall_cycles: 500,
            pte_update_cycles: 20,
            migrate_page_cycles: 3300,
            migrate_copy_gbps: 12.0,
            numa_hint_fault_cycles: 2000,
            numa_scan_pte_cycles: 32,
            lru_gen_walk_pte_cycles: 32,
            lru_gen_update_gen_cycles: 55,
            timer_interrupt_cycles: 3_500,
            nanosleep_cycles: 0,
            nanosleep_past_cycles: 0,
            fork_cycles: 50_000,
            exec_cycles: 100_000,
            exit_cycles: 20_000,
        }
    }
}
