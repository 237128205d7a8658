//! x86 TLB management (arch/x86/mm/tlb.c): PCID-tagged context switches, `flush_tlb_mm_range`
//! with the single-page ceiling, the batched unmap flush, and IPI shootdowns counted in
//! `/proc/interrupts` exactly as `flush_tlb_func` counts them.

use crate::arch::{ArchTlbBatch, TlbCtx};
use crate::config::Config;
use crate::machine::cpu::Cpu;
use crate::machine::Machine;
use crate::mm::mm_types::{CpuMask, Mm};
use crate::mm::page::NIL;
use crate::stats::{Perf, Vm};

/// MAX_PHYSMEM_BITS with 4-level paging (arch/x86/include/asm/sparsemem.h; 52 needs LA57,
/// which tierlab does not model).
pub const MAX_PHYSMEM_BITS: u32 = 46;

/// Swap offset bits of an x86-64 swap PTE: bits 14..63, stored inverted
/// (arch/x86/include/asm/pgtable_64.h SWP_TYPE_BITS 5, SWP_OFFSET_FIRST_BIT 9).
const SWP_OFFSET_BITS: u32 = 64 - (9 + 5);
const SWP_OFFSET_FIRST_BIT: u32 = 9;

/// arch_max_swapfile_size (arch/x86/mm/init.c): with the L1TF bug and its mitigation on,
/// offsets stay below half the physical address space (l1tf_pfn_limit), shifted up by the
/// three offset bits below the PFN's.
pub fn arch_max_swapfile_size(cfg: &Config) -> u64 {
    let pages = crate::mm::swapfile::generic_max_swapfile_size(SWP_OFFSET_BITS);
    if cfg.machine.l1tf && cfg.x86.l1tf != "off" {
        let l1tf_limit = 1u64 << (cfg.machine.phys_bits - 1 - crate::mm::pgtable::PAGE_SHIFT);
        let l1tf_limit = l1tf_limit << (crate::mm::pgtable::PAGE_SHIFT - SWP_OFFSET_FIRST_BIT);
        return pages.min(l1tf_limit);
    }
    pages
}

/// One of a CPU's dynamic ASIDs/PCIDs (cpu_tlbstate.ctxs[]): which mm it holds and the mm's
/// tlb_gen the TLB contents are known to be current with.
#[derive(Clone, Copy, Debug)]
pub struct AsidSlot {
    pub mm: u32,
    pub tlb_gen: u64,
}

/// Per-CPU TLB state the kernel keeps (struct tlb_state and tlb_state_shared).
#[derive(Clone, Debug)]
pub struct TlbState {
    /// cpu_tlbstate.loaded_mm (NIL: init_mm).
    pub loaded_mm: u32,
    /// cpu_tlbstate_shared.is_lazy: running no user task but keeping the last mm loaded.
    pub is_lazy: bool,
    pub asids: Vec<AsidSlot>,
    /// Round-robin victim for the next ASID allocation (choose_new_asid's next_asid).
    pub next_asid: u8,
}

/// What one flush request asks of each CPU (struct flush_tlb_info).
#[derive(Clone, Copy, Debug)]
pub struct FlushInfo {
    /// None: a batched flush of every mm (arch_tlbbatch_flush passes mm = NULL).
    pub mm: Option<usize>,
    pub start_vpn: u32,
    pub end_vpn: u32,
    /// log2 of the pages one INVLPG covers in the range (9 for a huge PMD's 2 MiB).
    pub stride_shift: u32,
    pub full: bool,
    pub trim_cpumask: bool,
    /// Page tables were freed (tlb_finish_mmu after free_pgtables): every CPU of the mask
    /// is interrupted, lazy ones too, since their paging-structure caches may hold them.
    pub freed_tables: bool,
}

pub struct X86 {
    pub cpus: Vec<TlbState>,
    /// tlb_single_page_flush_ceiling (debugfs): longer ranges flush the whole PCID.
    pub ceiling: u32,
}

impl X86 {
    pub fn new(cfg: &Config) -> X86 {
        let slot = AsidSlot {
            mm: NIL,
            tlb_gen: 0,
        };
        let state = TlbState {
            loaded_mm: NIL,
            is_lazy: false,
            asids: vec![slot; cfg.machine.tlb.nr_dyn_asids as usize],
            next_asid: 0,
        };
        X86 {
            cpus: vec![state; cfg.machine.cpus as usize],
            ceiling: cfg.x86.tlb_single_page_flush_ceiling,
        }
    }

    /// switch_mm_irqs_off: load `mm` on CPU `c`, reusing its PCID when the CPU still has one
    /// and flushing it only if the mm's tlb_gen moved on meanwhile.
    pub fn switch_mm_irqs_off(&mut self, t: &mut TlbCtx, c: usize, mm: usize) {
        let gen = t.mms[mm].tlb_gen;
        let st = &mut self.cpus[c];
        let cpu = &mut t.m.cpus[c];
        let mut flushed = false;
        if st.loaded_mm == mm as u32 {
            let slot = &mut st.asids[cpu.cur_asid as usize];
            if slot.tlb_gen < gen {
                slot.tlb_gen = gen;
                flushed = true;
            }
        } else {
            let n = st.asids.len();
            let asid = match st.asids.iter().position(|s| s.mm == mm as u32) {
                Some(i) => {
                    if st.asids[i].tlb_gen < gen {
                        flushed = true;
                    }
                    i
                }
                None => {
                    // choose_new_asid: round-robin victim, its old contents must go.
                    let i = st.next_asid as usize;
                    st.next_asid = ((i + 1) % n) as u8;
                    flushed = true;
                    i
                }
            };
            st.asids[asid] = AsidSlot {
                mm: mm as u32,
                tlb_gen: gen,
            };
            cpu.cur_asid = asid as u16;
            st.loaded_mm = mm as u32;
        }
        st.is_lazy = false;
        if flushed {
            let asid = cpu.cur_asid;
            cpu.flush_asid(asid);
            count_full_flush(cpu);
        }
        t.mms[mm].cpumask.set(c);
    }

    /// enter_lazy_tlb: the CPU runs no user task but keeps the mm loaded.
    pub fn enter_lazy_tlb(&mut self, c: usize) {
        if self.cpus[c].loaded_mm != NIL {
            self.cpus[c].is_lazy = true;
        }
    }

    /// flush_tlb_mm_range: flush [start, end) of `mm`, one invalidation per 2^stride_shift
    /// pages, everywhere it may be cached.
    pub fn flush_tlb_mm_range(
        &mut self,
        t: &mut TlbCtx,
        c: usize,
        mm: usize,
        (start_vpn, end_vpn, stride_shift): (u32, u32, u32),
        freed_tables: bool,
    ) {
        t.mms[mm].tlb_gen += 1;
        let full = end_vpn.saturating_sub(start_vpn) >> stride_shift > self.ceiling;
        let mask = t.mms[mm].cpumask;
        if mask.any_but(c) {
            // should_trim_cpumask: at most once per second per mm.
            let now = t.m.cpus[c].clock;
            let trim = now >= t.mms[mm].next_trim;
            if trim {
                t.mms[mm].next_trim = now + t.m.ns_to_cycles(1e9);
            }
            let info = FlushInfo {
                mm: Some(mm),
                start_vpn,
                end_vpn,
                stride_shift,
                full,
                trim_cpumask: trim,
                freed_tables,
            };
            self.flush_tlb_multi(t, c, mask, info);
        } else if self.cpus[c].loaded_mm == mm as u32 {
            self.flush_local(t, c, (start_vpn, end_vpn, stride_shift), full, true);
        }
    }

    /// arch_tlbbatch_add_pending: inc_mm_tlb_gen and collect mm_cpumask.
    pub fn arch_tlbbatch_add_pending(&mut self, batch: &mut ArchTlbBatch, mm: &mut Mm) {
        mm.tlb_gen += 1;
        batch.cpumask.union(&mm.cpumask);
    }

    /// arch_tlbbatch_flush: a full flush on every CPU of the batch (mm = NULL).
    pub fn arch_tlbbatch_flush(&mut self, t: &mut TlbCtx, c: usize, batch: &ArchTlbBatch) {
        let mask = batch.cpumask;
        let info = FlushInfo {
            mm: None,
            start_vpn: 0,
            end_vpn: 0,
            stride_shift: 0,
            full: true,
            trim_cpumask: false,
            freed_tables: false,
        };
        if mask.any_but(c) {
            self.flush_tlb_multi(t, c, mask, info);
        } else if mask.test(c) {
            self.flush_local(t, c, (0, 0, 0), true, true);
        }
    }

    /// The remote CPUs of `mask` a batched flush from `c` would interrupt (lazy ones skipped).
    pub fn ipi_targets(&self, c: usize, mask: &CpuMask) -> u64 {
        mask.iter()
            .filter(|&r| r != c && r < self.cpus.len() && !self.cpus[r].is_lazy)
            .count() as u64
    }

    /// Whether CPU `c` could use a TLB entry of PCID `asid` without a flush first: the CPU runs
    /// that mm now, or its PCID is current (a stale PCID is flushed at switch_mm).
    pub fn entry_usable(&self, m: &Machine, mms: &[Mm], c: usize, asid: u16) -> Option<usize> {
        let st = &self.cpus[c];
        let slot = st.asids[asid as usize];
        if slot.mm == NIL {
            return None;
        }
        let mm = slot.mm as usize;
        let running = st.loaded_mm == slot.mm && m.cpus[c].cur_asid == asid && !st.is_lazy;
        let current = slot.tlb_gen >= mms[mm].tlb_gen;
        (current || running).then_some(mm)
    }

    /// native_flush_tlb_multi: IPI every CPU that should_flush_tlb, flush locally if needed,
    /// and wait for the acknowledgements.
    fn flush_tlb_multi(&mut self, t: &mut TlbCtx, c: usize, mask: CpuMask, info: FlushInfo) {
        t.vm.inc(Vm::NrTlbRemoteFlush);

        let mut targets = 0u64;
        let mut answers = 0u64;
        for r in mask.iter() {
            if r == c || r >= self.cpus.len() {
                continue;
            }
            // should_flush_tlb, unless freed tables send to every CPU (on_each_cpu_mask)
            let st = &self.cpus[r];
            if !info.freed_tables {
                if st.is_lazy {
                    continue;
                }
                if let Some(mm) = info.mm {
                    if st.loaded_mm != mm as u32 && !info.trim_cpumask {
                        continue;
                    }
                }
            }
            targets += 1;
            if r < 64 {
                answers |= 1 << r;
            }
            self.flush_tlb_func_remote(t, r, info);
        }
        let cost = &t.m.cost;
        let send = cost.ipi_send_cycles as u64
            + cost.ipi_send_per_cpu_cycles as u64 * targets.saturating_sub(1);
        let wait = cost.ipi_receive_cycles as u64;
        if targets > 0 {
            t.m.charge_sys(c, send);
            // smp_call_function_many_cond → csd_lock_wait spins from here: under vcpu_turns
            // its first PAUSE passes the turn on (sim/turns.rs run_turn).
            let cpu = &mut t.m.cpus[c];
            if t.m.vcpu_turns {
                cpu.ipi_wait_from.get_or_insert(cpu.clock);
                cpu.ipi_wait_targets |= answers;
            }
            t.m.charge_sys(c, wait);
        }
        let local = match info.mm {
            Some(mm) => self.cpus[c].loaded_mm == mm as u32,
            None => mask.test(c),
        };
        if local {
            let range = (info.start_vpn, info.end_vpn, info.stride_shift);
            self.flush_local(t, c, range, info.full, true);
        }
    }

    /// switch_mm_irqs_off(NULL, &init_mm, NULL): the CPU leaves the user mm it kept lazily.
    fn switch_to_init_mm(&mut self, c: usize) {
        self.cpus[c].loaded_mm = NIL;
        self.cpus[c].is_lazy = false;
    }

    /// flush_tlb_func on a remote CPU (the IPI handler), counted in irq_tlb_count even when it
    /// returns early.
    fn flush_tlb_func_remote(&mut self, t: &mut TlbCtx, r: usize, info: FlushInfo) {
        let recv = t.m.cost.ipi_receive_cycles as u64;
        t.m.charge_sys(r, recv);
        let cpu = &mut t.m.cpus[r];
        cpu.irq.tlb += 1;
        cpu.irq.cal += 1;
        t.vm.inc(Vm::NrTlbRemoteFlushReceived);
        let loaded = self.cpus[r].loaded_mm;
        if let Some(mm) = info.mm {
            if loaded != mm as u32 {
                t.mms[mm].cpumask.clear(r);
                return;
            }
        }
        let range = (info.start_vpn, info.end_vpn, info.stride_shift);
        self.flush_local(t, r, range, info.full, false);
    }

    /// flush_tlb_func's work on CPU `c`: flush the loaded mm's translations and record it as
    /// current. A lazy CPU switches to init_mm instead (remote ones get here only for freed
    /// page tables). A partial flush is done only when this CPU is exactly one generation
    /// behind; a CPU that missed a generation (a deferred flush) flushes fully.
    fn flush_local(
        &mut self,
        t: &mut TlbCtx,
        c: usize,
        (start_vpn, end_vpn, stride_shift): (u32, u32, u32),
        full: bool,
        initiator: bool,
    ) {
        let loaded = self.cpus[c].loaded_mm;
        if loaded == NIL {
            return;
        }
        if self.cpus[c].is_lazy {
            self.switch_to_init_mm(c);
            return;
        }
        let gen = t.mms[loaded as usize].tlb_gen;
        let cpu = &mut t.m.cpus[c];
        let asid = cpu.cur_asid;
        let slot = &mut self.cpus[c].asids[asid as usize];
        let local_gen = slot.tlb_gen;
        if local_gen >= gen {
            return;
        }
        let full = full || local_gen + 1 != gen;
        if full {
            cpu.flush_asid(asid);
            count_full_flush(cpu);
            let cycles = t.m.cost.full_flush_cycles as u64;
            t.m.charge_sys(c, cycles);
            if initiator {
                t.vm.inc(Vm::NrTlbLocalFlushAll);
            }
        } else {
            for vpn in (start_vpn..end_vpn).step_by(1 << stride_shift) {
                cpu.flush_page(vpn, asid);
                cpu.perf.inc(Perf::TlbFlushDtlbThread);
                cpu.perf.inc(Perf::TlbFlushStlbAny);
            }
            let n = ((end_vpn - start_vpn) >> stride_shift).max(1) as u64;
            let cycles = t.m.cost.invlpg_cycles as u64 * n;
            t.m.charge_sys(c, cycles);
            if initiator {
                t.vm.add(Vm::NrTlbLocalFlushOne, n);
            }
        }
        slot.tlb_gen = slot.tlb_gen.max(gen);
    }
}

/// A full flush empties the iTLB, the dTLB and the STLB: count it in all three perf events.
fn count_full_flush(cpu: &mut Cpu) {
    cpu.perf.inc(Perf::ItlbFlush);
    cpu.perf.inc(Perf::TlbFlushDtlbThread);
    cpu.perf.inc(Perf::TlbFlushStlbAny);
}
