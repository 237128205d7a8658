//! The architecture layer: how TLBs are kept coherent with the page tables. `mm/` calls the
//! kernel's generic TLB API below (`flush_tlb_range`, `arch_tlbbatch_flush`, ...) and never
//! names an architecture; each architecture is one file implementing it, matched here once per
//! flush or context switch, never per access.
//!
//! To add an architecture: write `arch/NAME.rs` with a state type implementing the same
//! methods as `x86::X86`, add a variant to `Arch` (matched below) and accept its name in
//! `config::Arch`.

pub mod arm64;
pub mod arm64_asid;
pub mod x86;

use crate::config::Arch as ArchName;
use crate::config::Config;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mm_types::{CpuMask, Mm};
use crate::stats::VmCounters;

/// The `machine.arch` names of the implemented architectures (scenario tests run each).
pub const IMPLEMENTED: &[&str] = &["x86", "arm64"];

/// The running architecture's TLB-management state.
pub enum Arch {
    X86(x86::X86),
    Arm64(arm64::Arm64),
}

/// struct arch_tlbflush_unmap_batch: what a batched unmap must flush before its frames are
/// freed (on x86, the CPUs that may cache one of the unmapped translations).
#[derive(Clone, Copy, Debug, Default)]
pub struct ArchTlbBatch {
    pub cpumask: CpuMask,
}

/// What a TLB operation may touch: the machine, the address spaces and the vm counters.
pub struct TlbCtx<'a> {
    pub m: &'a mut Machine,
    pub mms: &'a mut [Mm],
    pub vm: &'a mut VmCounters,
}

impl Arch {
    /// The TLB state of the architecture `machine.arch` names (config validation has
    /// already refused an unimplemented one).
    pub fn new(cfg: &Config) -> Arch {
        match cfg.machine.arch {
            ArchName::X86 => Arch::X86(x86::X86::new(cfg)),
            ArchName::Arm64 => Arch::Arm64(arm64::Arm64::new(cfg)),
        }
    }
}

/// MAX_PHYSMEM_BITS: the widest physical address the kernel's memory model covers.
pub fn max_physmem_bits(cfg: &Config) -> u32 {
    match cfg.machine.arch {
        ArchName::X86 => x86::MAX_PHYSMEM_BITS,
        ArchName::Arm64 => arm64::MAX_PHYSMEM_BITS,
    }
}

/// arch_max_swapfile_size: how many swap offsets the architecture's swap PTE can hold.
pub fn max_swapfile_size(cfg: &Config) -> u64 {
    match cfg.machine.arch {
        ArchName::X86 => x86::arch_max_swapfile_size(cfg),
        ArchName::Arm64 => crate::mm::swapfile::generic_max_swapfile_size(arm64::SWP_OFFSET_BITS),
    }
}

impl Kernel {
    /// switch_mm: CPU `c` starts running `mm` (context_switch to a user task).
    pub fn switch_mm(&mut self, m: &mut Machine, c: usize, mm: usize) {
        // context_switch → lru_gen_use_mm: the mm is worth an MGLRU walk again.
        self.mms[mm].lru_gen_bitmap = u64::MAX;
        let mut t = TlbCtx {
            m,
            mms: &mut self.mms,
            vm: &mut self.vm,
        };
        match &mut self.arch {
            Arch::X86(x) => x.switch_mm_irqs_off(&mut t, c, mm),
            Arch::Arm64(a) => a.switch_mm(&mut t, c, mm),
        }
    }

    /// enter_lazy_tlb: CPU `c` runs no user task but keeps its last mm loaded.
    pub fn enter_lazy_tlb(&mut self, c: usize) {
        match &mut self.arch {
            Arch::X86(x) => x.enter_lazy_tlb(c),
            Arch::Arm64(a) => a.enter_lazy_tlb(c),
        }
    }

    /// Whether CPU `c` is in lazy TLB mode (idle, its last mm still loaded).
    pub fn cpu_is_lazy(&self, c: usize) -> bool {
        match &self.arch {
            Arch::X86(x) => x.cpus[c].is_lazy,
            Arch::Arm64(a) => a.cpus[c].is_lazy,
        }
    }

    /// flush_tlb_range: flush pages [start_vpn, end_vpn) of `mm` wherever they may be cached.
    pub fn flush_tlb_range(&mut self, m: &mut Machine, c: usize, mm: usize, s: u32, e: u32) {
        self.flush_tlb_range_stride(m, c, mm, s, e, 0);
    }

    /// flush_tlb_range with a stride of 2^`stride_shift` pages (flush_pmd_tlb_range: one
    /// invalidation per huge PMD).
    pub fn flush_tlb_range_stride(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        s: u32,
        e: u32,
        stride_shift: u32,
    ) {
        let mut t = TlbCtx {
            m,
            mms: &mut self.mms,
            vm: &mut self.vm,
        };
        match &mut self.arch {
            Arch::X86(x) => x.flush_tlb_mm_range(&mut t, c, mm, (s, e, stride_shift), false),
            Arch::Arm64(a) => a.flush_tlb_range_stride(&mut t, c, mm, s, e, stride_shift),
        }
    }

    /// tlb_finish_mmu's flush after free_pgtables (flush_tlb_mm_range with freed_tables):
    /// every translation of `mm`, on every CPU that may cache its page tables.
    pub fn flush_tlb_mm_freed_tables(&mut self, m: &mut Machine, c: usize, mm: usize) {
        let mut t = TlbCtx {
            m,
            mms: &mut self.mms,
            vm: &mut self.vm,
        };
        match &mut self.arch {
            Arch::X86(x) => x.flush_tlb_mm_range(&mut t, c, mm, (0, u32::MAX, 0), true),
            // arm64's tlb_flush: a torn-down mm's walk caches go with flush_tlb_mm.
            Arch::Arm64(a) => a.flush_tlb_range(&mut t, c, mm, 0, u32::MAX),
        }
    }

    /// flush_tlb_page: one page of `mm`.
    pub fn flush_tlb_page(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32) {
        self.flush_tlb_range(m, c, mm, vpn, vpn + 1);
    }

    /// should_defer_flush (mm/rmap.c): whether CPU `c` may leave the flush of an unmapped
    /// PTE of `mm` to a batch (TTU_BATCH_FLUSH callers only).
    pub fn should_defer_flush(&self, c: usize, mm: usize) -> bool {
        self.cfg.arch.batched_unmap_flush
            && match &self.arch {
                // arch_tlbbatch_should_defer: only when another CPU may cache it.
                Arch::X86(_) => self.mms[mm].cpumask.any_but(c),
                Arch::Arm64(a) => a.should_defer(),
            }
    }

    /// arch_tlbbatch_add_pending: CPU `c` cleared the PTE of page `vpn` of `mm` without a
    /// flush; remember (or start) what `batch` must flush for it.
    pub fn arch_tlbbatch_add_pending(
        &mut self,
        m: &mut Machine,
        c: usize,
        batch: &mut ArchTlbBatch,
        mm: usize,
        vpn: u32,
    ) {
        let mut t = TlbCtx {
            m,
            mms: &mut self.mms,
            vm: &mut self.vm,
        };
        match &mut self.arch {
            Arch::X86(x) => x.arch_tlbbatch_add_pending(batch, &mut t.mms[mm]),
            Arch::Arm64(a) => a.arch_tlbbatch_add_pending(&mut t, c, batch, mm, vpn),
        }
    }

    /// arch_tlbbatch_flush: flush everything `batch` collected, run by CPU `c`.
    pub fn arch_tlbbatch_flush(&mut self, m: &mut Machine, c: usize, batch: &ArchTlbBatch) {
        if self.cfg.debug.tlb_break == crate::config::TlbBreak::SkipBatchedFlush {
            return;
        }
        let mut t = TlbCtx {
            m,
            mms: &mut self.mms,
            vm: &mut self.vm,
        };
        match &mut self.arch {
            Arch::X86(x) => x.arch_tlbbatch_flush(&mut t, c, batch),
            Arch::Arm64(a) => a.arch_tlbbatch_flush(&mut t, c),
        }
    }

    /// The CPUs of `batch` other than `c` that a flush would interrupt now.
    pub fn arch_tlbbatch_targets(&self, c: usize, batch: &ArchTlbBatch) -> u64 {
        match &self.arch {
            Arch::X86(x) => x.ipi_targets(c, &batch.cpumask),
            Arch::Arm64(a) => a.ipi_targets(c, &batch.cpumask),
        }
    }

    /// For the checker: the mm whose translations a TLB entry tagged `asid` on CPU `c` may
    /// still be used for without a flush first, if any.
    pub fn arch_entry_usable(&self, m: &Machine, c: usize, asid: u16) -> Option<usize> {
        match &self.arch {
            Arch::X86(x) => x.entry_usable(m, &self.mms, c, asid),
            Arch::Arm64(a) => a.entry_usable(m, c, asid),
        }
    }
}
