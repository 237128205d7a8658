//! The arm64 ASID allocator (arch/arm64/mm/context.c): an mm gets an ASID at its first switch
//! and keeps it within a generation; when every ASID of a generation is taken, the generation
//! rolls over (new_context → flush_context): the bitmap is cleared but for the ASIDs CPUs are
//! running (reserved_asids), and every CPU flushes its whole TLB at its next switch
//! (tlb_flush_pending). With KPTI each mm uses an even/odd pair, so half the ASIDs are there.

use crate::mm::page::NIL;

pub struct AsidAllocator {
    /// ID_AA64MMFR0_EL1.ASIDBits: 8 or 16.
    bits: u32,
    /// asid_generation: a multiple of 1 << bits, from 1 << bits.
    generation: u64,
    /// asid_map: the ASIDs taken in this generation.
    map: Vec<bool>,
    /// new_context's cur_idx: where the search for a free ASID resumes.
    cur_idx: usize,
    /// arm64_kernel_unmapped_at_el0: the odd ASIDs belong to the kernel's half of each pair.
    kpti: bool,
    /// Per CPU: active_asids (0 after a rollover until the CPU switches again).
    active: Vec<u64>,
    /// Per CPU: reserved_asids, the context id it was running at the last rollover.
    reserved: Vec<u64>,
    /// Per CPU: tlb_flush_pending.
    flush_pending: Vec<bool>,
    /// Per mm: mm->context.id (generation | ASID), 0 before its first switch.
    context_id: Vec<u64>,
    /// The mm holding each ASID in this generation (NIL: none), for TLBIs and the checker.
    owner: Vec<u32>,
    /// Generations rolled over so far.
    pub rollovers: u64,
}

impl AsidAllocator {
    pub fn new(bits: u32, kpti: bool, cpus: usize) -> AsidAllocator {
        let n = 1usize << bits;
        let mut a = AsidAllocator {
            bits,
            generation: 1 << bits,
            map: vec![false; n],
            cur_idx: 1,
            kpti,
            active: vec![0; cpus],
            reserved: vec![0; cpus],
            flush_pending: vec![false; cpus],
            context_id: Vec::new(),
            owner: vec![NIL; n],
            rollovers: 0,
        };
        a.set_reserved_asid_bits();
        a
    }

    fn asid(&self, ctx: u64) -> usize {
        (ctx & ((1 << self.bits) - 1)) as usize
    }

    fn gen_match(&self, ctx: u64) -> bool {
        (ctx ^ self.generation) >> self.bits == 0
    }

    /// The ASID `mm` last had (0 if it never ran): what a TLBI for it names, even when the
    /// generation has moved on (the kernel's ASID(mm)).
    pub fn asid_of(&self, mm: usize) -> u16 {
        self.asid(self.context_id.get(mm).copied().unwrap_or(0)) as u16
    }

    /// check_and_switch_context: CPU `c` switches to `mm`. Returns its ASID and whether the
    /// CPU must flush its whole TLB first (local_flush_tlb_all after a rollover).
    pub fn check_and_switch_context(&mut self, c: usize, mm: usize) -> (u16, bool) {
        if mm >= self.context_id.len() {
            // mm_init: context.id starts at 0.
            self.context_id.resize(mm + 1, 0);
        }
        let mut ctx = self.context_id[mm];
        // The fast path: an ASID of this generation, and no rollover since this CPU's last
        // switch (which zeroes active_asids).
        if self.active[c] != 0 && self.gen_match(ctx) {
            self.active[c] = ctx;
            return (self.asid(ctx) as u16, false);
        }
        if !self.gen_match(ctx) {
            ctx = self.new_context(mm);
            self.context_id[mm] = ctx;
        }
        let flush = std::mem::take(&mut self.flush_pending[c]);
        self.active[c] = ctx;
        (self.asid(ctx) as u16, flush)
    }

    /// new_context: keep the old ASID if a CPU still runs it (check_update_reserved_asid) or
    /// it is free in the new generation, else the next free one, rolling over when none is.
    fn new_context(&mut self, mm: usize) -> u64 {
        let old = self.context_id[mm];
        if old != 0 {
            let a = self.asid(old);
            let new = a as u64 | self.generation;
            let mut hit = false;
            for r in self.reserved.iter_mut().filter(|r| **r == old) {
                *r = new;
                hit = true;
            }
            if hit || !std::mem::replace(&mut self.map[a], true) {
                self.owner[a] = mm as u32;
                return new;
            }
        }
        let a = match self.find_next_zero(self.cur_idx) {
            Some(a) => a,
            None => {
                self.generation += 1 << self.bits;
                self.rollovers += 1;
                self.flush_context();
                // More ASIDs than CPUs: one is free now.
                self.find_next_zero(1)
                    .expect("a free ASID after a rollover")
            }
        };
        self.map[a] = true;
        self.cur_idx = a;
        self.owner[a] = mm as u32;
        a as u64 | self.generation
    }

    fn find_next_zero(&self, from: usize) -> Option<usize> {
        (from..self.map.len()).find(|&a| !self.map[a])
    }

    /// set_reserved_asid_bits: an empty map, or with KPTI every odd ASID taken.
    fn set_reserved_asid_bits(&mut self) {
        for (a, taken) in self.map.iter_mut().enumerate() {
            *taken = self.kpti && a % 2 == 1;
        }
    }

    /// flush_context: a new generation. The ASIDs CPUs run stay reserved; every CPU flushes
    /// its TLB at its next switch.
    fn flush_context(&mut self) {
        self.set_reserved_asid_bits();
        self.owner.fill(NIL);
        for c in 0..self.active.len() {
            let mut ctx = std::mem::take(&mut self.active[c]);
            if ctx == 0 {
                // Rolled over twice without switching: its reserved ASID is all that remains.
                ctx = self.reserved[c];
            }
            let a = self.asid(ctx);
            self.map[a] = true;
            self.reserved[c] = ctx;
        }
        self.flush_pending.fill(true);
    }

    /// For the checker: the mm a TLB entry tagged `asid` on CPU `c` translates for, if the
    /// CPU can use it before flushing: with a flush pending only the ASID it runs (`running`),
    /// otherwise the ASID's owner in this generation.
    pub fn entry_usable(
        &self,
        c: usize,
        asid: u16,
        running: Option<(u16, usize)>,
    ) -> Option<usize> {
        if self.flush_pending[c] {
            return running.and_then(|(cur, mm)| (cur == asid).then_some(mm));
        }
        let mm = *self.owner.get(asid as usize)?;
        (mm != NIL).then_some(mm as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asids_are_kept_until_a_rollover_which_flushes_every_cpu_once() {
        // 8 bits: ASIDs 1..=255 (0 is init_mm's).
        let mut a = AsidAllocator::new(8, false, 2);
        for mm in 0..255 {
            assert_eq!(a.check_and_switch_context(0, mm), (mm as u16 + 1, false));
        }
        // Back to mm 3: same ASID, no flush.
        assert_eq!(a.check_and_switch_context(1, 3), (4, false));
        // mm 255 finds none free: a new generation. CPU 0 runs mm 254 (ASID 255) and CPU 1
        // mm 3 (ASID 4): both stay reserved; mm 255 gets ASID 1 and CPU 0 flushes.
        assert_eq!(a.check_and_switch_context(0, 255), (1, true));
        assert_eq!(a.rollovers, 1);
        assert_eq!(
            a.entry_usable(1, 4, Some((4, 3))),
            Some(3),
            "CPU 1 runs it still"
        );
        assert_eq!(
            a.entry_usable(1, 7, Some((4, 3))),
            None,
            "flush pending on CPU 1"
        );
        // mm 3 keeps ASID 4 (reserved), and CPU 1 flushes at its switch.
        assert_eq!(a.check_and_switch_context(1, 3), (4, true));
        // mm 0 lost ASID 1 to mm 255: it takes the next free one.
        assert_eq!(a.check_and_switch_context(1, 0), (2, false));
        assert_eq!(a.entry_usable(1, 1, None), Some(255));
    }

    #[test]
    fn with_kpti_mms_take_even_asids_only() {
        let mut a = AsidAllocator::new(8, true, 1);
        assert_eq!(a.check_and_switch_context(0, 0).0, 2);
        assert_eq!(a.check_and_switch_context(0, 1).0, 4);
        for mm in 2..127 {
            a.check_and_switch_context(0, mm);
        }
        assert_eq!(a.asid_of(126), 254);
        // 127 pairs used: the 128th mm rolls over.
        assert_eq!(a.check_and_switch_context(0, 127), (2, true));
    }
}
