//! x86 TLB management (arch/x86/mm/tlb.c): PCID-tagged context switches, `flush_tlb_mm_range`
//! with the single-page ceiling, the batched unmap flush, and IPI shootdowns counted in
//! `/proc/interrupts` exactly as `flush_tlb_func` counts them.

use crate::machine::cpu::AsidSlot;
use crate::mm::mm_types::CpuMask;
use crate::mm::page::NIL;
use crate::sim::Sim;
use crate::stats::{Perf, Vm};

/// What one flush request asks of each CPU (struct flush_tlb_info).
#[derive(Clone, Copy, Debug)]
pub struct FlushInfo {
    /// None: a batched flush of every mm (arch_tlbbatch_flush passes mm = NULL).
    pub mm: Option<usize>,
    pub start_vpn: u32,
    pub end_vpn: u32,
    pub full: bool,
    pub trim_cpumask: bool,
}

impl Sim {
    /// switch_mm_irqs_off: load `mm` on CPU `c`, reusing its PCID when the CPU still has one
    /// and flushing it only if the mm's tlb_gen moved on meanwhile.
    pub fn switch_mm(&mut self, c: usize, mm: usize) {
        let gen = self.mms[mm].tlb_gen;
        let cpu = &mut self.cpus[c];
        let mut flushed = false;
        if cpu.loaded_mm == mm as u32 {
            let slot = &mut cpu.asids[cpu.cur_asid as usize];
            if slot.tlb_gen < gen {
                slot.tlb_gen = gen;
                flushed = true;
            }
        } else {
            let n = cpu.asids.len();
            let asid = match cpu.asids.iter().position(|s| s.mm == mm as u32) {
                Some(i) => {
                    if cpu.asids[i].tlb_gen < gen {
                        flushed = true;
                    }
                    i
                }
                None => {
                    // choose_new_asid: round-robin victim, its old contents must go.
                    let i = cpu.next_asid as usize;
                    cpu.next_asid = ((i + 1) % n) as u8;
                    flushed = true;
                    i
                }
            };
            cpu.asids[asid] = AsidSlot {
                mm: mm as u32,
                tlb_gen: gen,
            };
            cpu.cur_asid = asid as u8;
            cpu.loaded_mm = mm as u32;
        }
        cpu.is_lazy = false;
        if flushed {
            let asid = cpu.cur_asid;
            cpu.flush_asid(asid);
            count_full_flush(cpu);
        }
        self.mms[mm].cpumask.set(c);
    }

    /// enter_lazy_tlb: the CPU runs no user task but keeps the mm loaded.
    pub fn enter_lazy_tlb(&mut self, c: usize) {
        if self.cpus[c].loaded_mm != NIL {
            self.cpus[c].is_lazy = true;
        }
    }

    /// flush_tlb_mm_range: flush [start, end) of `mm` everywhere it may be cached.
    pub fn flush_tlb_mm_range(&mut self, c: usize, mm: usize, start_vpn: u32, end_vpn: u32) {
        self.mms[mm].tlb_gen += 1;
        let ceiling = self.cfg.x86.tlb_single_page_flush_ceiling;
        let full = end_vpn.saturating_sub(start_vpn) > ceiling;
        let mask = self.mms[mm].cpumask;
        if mask.any_but(c) {
            // should_trim_cpumask: at most once per second per mm.
            let now = self.cpus[c].clock;
            let trim = now >= self.mms[mm].next_trim;
            if trim {
                self.mms[mm].next_trim = now + self.ns_to_cycles(1e9);
            }
            let info = FlushInfo {
                mm: Some(mm),
                start_vpn,
                end_vpn,
                full,
                trim_cpumask: trim,
            };
            self.flush_tlb_multi(c, mask, info);
        } else if self.cpus[c].loaded_mm == mm as u32 {
            self.flush_local(c, start_vpn, end_vpn, full, true);
        }
    }

    /// try_to_unmap_flush → arch_tlbbatch_flush: one full flush on every CPU of the batch.
    pub fn try_to_unmap_flush(&mut self, c: usize) {
        if !self.tlb_ubc.flush_required {
            return;
        }
        let mask = self.tlb_ubc.cpumask;
        self.tlb_ubc = Default::default();
        self.arch_tlbbatch_flush(c, mask);
    }

    /// arch_tlbbatch_flush: a full flush on every CPU of `mask` (mm = NULL).
    pub(crate) fn arch_tlbbatch_flush(&mut self, c: usize, mask: CpuMask) {
        let info = FlushInfo {
            mm: None,
            start_vpn: 0,
            end_vpn: 0,
            full: true,
            trim_cpumask: false,
        };
        if mask.any_but(c) {
            self.flush_tlb_multi(c, mask, info);
        } else if mask.test(c) {
            self.flush_local(c, 0, 0, true, true);
        }
        self.migrc_flushed(&mask);
    }

    /// native_flush_tlb_multi: IPI every CPU that should_flush_tlb, flush locally if needed,
    /// and wait for the acknowledgements.
    fn flush_tlb_multi(&mut self, c: usize, mask: CpuMask, info: FlushInfo) {
        self.vm.inc(Vm::NrTlbRemoteFlush);

        let mut targets = 0u64;
        for r in mask.iter() {
            if r == c || r >= self.cpus.len() {
                continue;
            }
            // should_flush_tlb
            let cpu = &self.cpus[r];
            if cpu.is_lazy {
                continue;
            }
            if let Some(mm) = info.mm {
                if cpu.loaded_mm != mm as u32 && !info.trim_cpumask {
                    continue;
                }
            }
            targets += 1;
            self.flush_tlb_func_remote(r, info);
        }
        let send = self.cost.ipi_send_cycles as u64
            + self.cost.ipi_send_per_cpu_cycles as u64 * targets.saturating_sub(1)
            + self.cost.ipi_receive_cycles as u64;
        if targets > 0 {
            self.charge_sys(c, send);
        }
        let local = match info.mm {
            Some(mm) => self.cpus[c].loaded_mm == mm as u32,
            None => mask.test(c),
        };
        if local {
            self.flush_local(c, info.start_vpn, info.end_vpn, info.full, true);
        }
    }

    /// flush_tlb_func on a remote CPU (the IPI handler), counted in irq_tlb_count even when it
    /// returns early.
    fn flush_tlb_func_remote(&mut self, r: usize, info: FlushInfo) {
        let recv = self.cost.ipi_receive_cycles as u64;
        self.charge_sys(r, recv);
        let cpu = &mut self.cpus[r];
        cpu.irq.tlb += 1;
        cpu.irq.cal += 1;
        self.vm.inc(Vm::NrTlbRemoteFlushReceived);
        if let Some(mm) = info.mm {
            if cpu.loaded_mm != mm as u32 {
                self.mms[mm].cpumask.clear(r);
                return;
            }
        }
        if self.cpus[r].loaded_mm == NIL {
            return;
        }
        self.flush_local(r, info.start_vpn, info.end_vpn, info.full, false);
    }

    /// Flush the loaded mm's translations on CPU `c` and record it as current. As in
    /// flush_tlb_func, a partial flush is done only when this CPU is exactly one generation
    /// behind; a CPU that missed a generation (a deferred flush) flushes fully.
    fn flush_local(&mut self, c: usize, start_vpn: u32, end_vpn: u32, full: bool, initiator: bool) {
        let loaded = self.cpus[c].loaded_mm;
        if loaded == NIL {
            return;
        }
        let gen = self.mms[loaded as usize].tlb_gen;
        let cpu = &mut self.cpus[c];
        let asid = cpu.cur_asid;
        let local_gen = cpu.asids[asid as usize].tlb_gen;
        if local_gen >= gen {
            return;
        }
        let full = full || local_gen + 1 != gen;
        if full {
            cpu.flush_asid(asid);
            count_full_flush(cpu);
            self.charge_sys(c, self.cost.full_flush_cycles as u64);
            if initiator {
                self.vm.inc(Vm::NrTlbLocalFlushAll);
            }
        } else {
            for vpn in start_vpn..end_vpn {
                cpu.flush_page(vpn, asid);
                cpu.perf.inc(Perf::TlbFlushDtlbThread);
                cpu.perf.inc(Perf::TlbFlushStlbAny);
            }
            let n = (end_vpn - start_vpn) as u64;
            self.charge_sys(c, self.cost.invlpg_cycles as u64 * n);
            if initiator {
                self.vm.add(Vm::NrTlbLocalFlushOne, n);
            }
        }
        let cpu = &mut self.cpus[c];
        let slot = &mut cpu.asids[cpu.cur_asid as usize];
        slot.tlb_gen = slot.tlb_gen.max(gen);
    }
}

/// A full flush empties the iTLB, the dTLB and the STLB: count it in all three perf events.
fn count_full_flush(cpu: &mut crate::machine::cpu::Cpu) {
    cpu.perf.inc(Perf::ItlbFlush);
    cpu.perf.inc(Perf::TlbFlushDtlbThread);
    cpu.perf.inc(Perf::TlbFlushStlbAny);
}
