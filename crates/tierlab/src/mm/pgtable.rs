//! Per-mm page tables with packed 64-bit PTEs (arch/x86/include/asm/pgtable_types.h bits,
//! plus the swap-entry form used for migration entries, include/linux/swapops.h).
//!
//! User virtual addresses are limited to 2^44 (vpn < 2^32). Three levels of 512-entry tables
//! (top table indexed by vpn >> 18) replace x86's four; the walk cost is a cost-table figure,
//! not the number of levels here.

pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Highest user address + 1 the simulator supports.
pub const USER_VA_END: u64 = 1 << 44;

/// PTE bit layout.
pub mod pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    /// _PAGE_ACCESSED
    pub const YOUNG: u64 = 1 << 2;
    pub const DIRTY: u64 = 1 << 3;
    /// _PAGE_PROTNONE: NUMA-hint PTE (present bit clear, pfn kept).
    pub const PROTNONE: u64 = 1 << 4;
    /// A non-present migration entry (is_migration_entry) whose pfn field names the source.
    pub const MIGRATION: u64 = 1 << 5;
    /// Migration entry kinds: writable (SWP_MIGRATION_WRITE) and the saved A/D bits
    /// (SWP_MIG_YOUNG / SWP_MIG_DIRTY).
    pub const MIG_WRITE: u64 = 1 << 6;
    pub const MIG_YOUNG: u64 = 1 << 7;
    pub const MIG_DIRTY: u64 = 1 << 8;
    /// A non-present swap entry: the swap device (type) in TYPE bits, the slot (offset) in
    /// the PFN field (pte_to_swp_entry).
    pub const SWAP: u64 = 1 << 9;
    /// _PAGE_PSE on a PMD: the entry maps 2 MiB (a THP or the huge zero page). `get` sets it
    /// on the 4 KiB view of a huge PMD's pages.
    pub const HUGE: u64 = 1 << 63;
    const SWAP_TYPE_SHIFT: u32 = 10;
    const SWAP_TYPE_MASK: u64 = 0b11 << SWAP_TYPE_SHIFT;
    pub const PFN_SHIFT: u32 = 12;

    /// swp_entry_to_pte(swp_entry(type, offset)).
    #[inline]
    pub fn mk_swap(ty: usize, offset: u32) -> u64 {
        ((offset as u64) << PFN_SHIFT) | ((ty as u64) << SWAP_TYPE_SHIFT) | SWAP
    }
    #[inline]
    pub fn is_swap(p: u64) -> bool {
        p & SWAP != 0
    }
    /// swp_type and swp_offset of a swap PTE.
    #[inline]
    pub fn swap_entry(p: u64) -> (usize, u32) {
        (
            ((p & SWAP_TYPE_MASK) >> SWAP_TYPE_SHIFT) as usize,
            (p >> PFN_SHIFT) as u32,
        )
    }

    #[inline]
    pub fn pfn(p: u64) -> u32 {
        (p >> PFN_SHIFT) as u32
    }
    #[inline]
    pub fn mk(pfn: u32, flags: u64) -> u64 {
        ((pfn as u64) << PFN_SHIFT) | flags
    }
    #[inline]
    pub fn is_none(p: u64) -> bool {
        p == 0
    }
    #[inline]
    pub fn present(p: u64) -> bool {
        p & PRESENT != 0
    }
    /// A PTE that maps a frame, present or PROT_NONE (pte_present on x86 counts PROTNONE).
    #[inline]
    pub fn maps_frame(p: u64) -> bool {
        p & (PRESENT | PROTNONE) != 0
    }
}

const TOP_BITS: u32 = 14; // vpn bits 18..32
const LEVEL_BITS: u32 = 9;
const LEVEL_MASK: u32 = (1 << LEVEL_BITS) - 1;
const NONE: u32 = u32::MAX;
/// A PMD slot that points at a PTE table (pmd_present without _PAGE_PSE): its index below.
const PMD_TABLE: u64 = 1 << 62;

/// 4 KiB pages under one PMD (HPAGE_PMD_NR).
pub const HPAGE_PMD_NR: u32 = 1 << LEVEL_BITS;

/// A page table: top → middle tables (PMDs) → leaf tables of PTEs. A PMD slot is empty, a
/// PTE table's index (PMD_TABLE), or a huge PMD mapping 2 MiB (pte::HUGE with PTE bits).
pub struct PageTable {
    top: Vec<u32>,
    mids: Vec<[u64; 512]>,
    leaves: Vec<[u64; 512]>,
}

impl Default for PageTable {
    fn default() -> Self {
        Self::new()
    }
}

/// The PTE a huge PMD `pmd` gives 4 KiB page `l` of its range: the PMD's bits, its frame
/// `l` pages on (what a walk of a PMD-mapped THP's subpage sees).
#[inline]
fn huge_subpage(pmd: u64, l: usize) -> u64 {
    pmd + ((l as u64) << pte::PFN_SHIFT)
}

impl PageTable {
    pub fn new() -> Self {
        PageTable {
            top: vec![NONE; 1 << TOP_BITS],
            mids: Vec::new(),
            leaves: Vec::new(),
        }
    }

    #[inline]
    fn split(vpn: u32) -> (usize, usize, usize) {
        (
            (vpn >> (2 * LEVEL_BITS)) as usize,
            ((vpn >> LEVEL_BITS) & LEVEL_MASK) as usize,
            (vpn & LEVEL_MASK) as usize,
        )
    }

    /// The PMD slot of top and middle indices `t`, `m` (0 when no middle table exists).
    #[inline]
    fn pmd_slot(&self, t: usize, m: usize) -> u64 {
        match self.top.get(t) {
            Some(&mid) if mid != NONE => self.mids[mid as usize][m],
            _ => 0,
        }
    }

    /// The PTE for `vpn`, or 0 when no table covers it (the page walk). Under a huge PMD it is
    /// the PMD's entry for that 4 KiB page, with pte::HUGE set.
    #[inline]
    pub fn get(&self, vpn: u32) -> u64 {
        let (t, m, l) = Self::split(vpn);
        let e = self.pmd_slot(t, m);
        if e & PMD_TABLE != 0 {
            self.leaves[(e as u32) as usize][l]
        } else if e == 0 {
            0
        } else {
            huge_subpage(e, l)
        }
    }

    /// Call `f` with every PTE of [s, e) that is not none, a PTE table's slice at a time (an
    /// absent table is skipped whole, a huge PMD gives its 4 KiB pages' view as `get` does):
    /// `get` per page, without the walk from the top each time.
    pub fn for_each_in(&self, s: u32, e: u32, mut f: impl FnMut(u64)) {
        let mut v = s as u64;
        let end = e as u64;
        while v < end {
            let pmd_end = ((v >> LEVEL_BITS) + 1) << LEVEL_BITS;
            let stop = pmd_end.min(end);
            let (t, m, l) = Self::split(v as u32);
            let n = (stop - v) as usize;
            let slot = self.pmd_slot(t, m);
            if slot & PMD_TABLE != 0 {
                for &p in &self.leaves[(slot as u32) as usize][l..l + n] {
                    if p != 0 {
                        f(p);
                    }
                }
            } else if slot != 0 {
                (l..l + n).for_each(|i| f(huge_subpage(slot, i)));
            }
            v = stop;
        }
    }

    /// A table that has given its memory back (a torn-down mm's): every PTE reads none.
    pub fn released() -> Self {
        PageTable {
            top: Vec::new(),
            mids: Vec::new(),
            leaves: Vec::new(),
        }
    }

    /// Whether a PTE table covers `vpn` (its PMD points at one).
    pub fn covers(&self, vpn: u32) -> bool {
        let (t, m, _) = Self::split(vpn);
        self.leaf(t, m).is_some()
    }

    /// The PTE table of top and middle indices `t`, `m`, if it exists.
    #[inline]
    fn leaf(&self, t: usize, m: usize) -> Option<usize> {
        let e = self.pmd_slot(t, m);
        (e & PMD_TABLE != 0).then_some((e as u32) as usize)
    }

    /// Mutable PTE slot for `vpn` if its PTE table exists (None under a huge PMD).
    #[inline]
    pub fn get_mut(&mut self, vpn: u32) -> Option<&mut u64> {
        let (t, m, l) = Self::split(vpn);
        let leaf = self.leaf(t, m)?;
        Some(&mut self.leaves[leaf][l])
    }

    /// The middle table for top index `t`, allocated on the way.
    fn mid_alloc(&mut self, t: usize) -> usize {
        if self.top[t] == NONE {
            self.top[t] = self.mids.len() as u32;
            self.mids.push([0; 512]);
        }
        self.top[t] as usize
    }

    /// The PTE slot for `vpn`, allocating tables on the way (__pte_alloc). Never under a huge
    /// PMD (split it first).
    pub fn entry(&mut self, vpn: u32) -> &mut u64 {
        let (t, m, l) = Self::split(vpn);
        let mid = self.mid_alloc(t);
        let e = self.mids[mid][m];
        assert!(
            e == 0 || e & PMD_TABLE != 0,
            "internal error: PTE write at vpn {vpn:#x} under a huge PMD"
        );
        if e == 0 {
            self.mids[mid][m] = PMD_TABLE | self.leaves.len() as u64;
            self.leaves.push([0; 512]);
        }
        let leaf = (self.mids[mid][m] as u32) as usize;
        &mut self.leaves[leaf][l]
    }

    /// The PTE table under PMD entry `pmd` (vpn >> 9), if the PMD points at one.
    pub fn pte_table_mut(&mut self, pmd: u32) -> Option<&mut [u64; 512]> {
        let (t, m, _) = Self::split(pmd << LEVEL_BITS);
        let leaf = self.leaf(t, m)?;
        Some(&mut self.leaves[leaf])
    }

    pub fn set(&mut self, vpn: u32, val: u64) {
        *self.entry(vpn) = val;
    }

    /// The huge PMD covering `vpn` (pmd_trans_huge, or a PMD migration entry), or 0.
    #[inline]
    pub fn huge_pmd(&self, vpn: u32) -> u64 {
        let (t, m, _) = Self::split(vpn);
        let e = self.pmd_slot(t, m);
        if e & PMD_TABLE != 0 {
            0
        } else {
            e
        }
    }

    /// Whether the PMD covering `vpn` is empty (pmd_none): no PTE table, no huge entry.
    pub fn pmd_none(&self, vpn: u32) -> bool {
        let (t, m, _) = Self::split(vpn);
        self.pmd_slot(t, m) == 0
    }

    /// Set the huge PMD covering `vpn` (set_pmd_at) to `val` (pte::HUGE set), or clear it
    /// with 0; the slot must not hold a PTE table.
    pub fn set_huge_pmd(&mut self, vpn: u32, val: u64) {
        debug_assert!(val == 0 || val & pte::HUGE != 0);
        let (t, m, _) = Self::split(vpn);
        let mid = self.mid_alloc(t);
        assert!(
            self.mids[mid][m] & PMD_TABLE == 0,
            "internal error: huge PMD over a PTE table at vpn {vpn:#x}"
        );
        self.mids[mid][m] = val;
    }

    /// __split_huge_pmd_locked's pmd_populate: the PMD covering `vpn` now points at a PTE
    /// table holding `ptes` (the deposited table, withdrawn).
    pub fn populate_pte_table(&mut self, vpn: u32, ptes: [u64; 512]) {
        let (t, m, _) = Self::split(vpn);
        let mid = self.mid_alloc(t);
        assert!(
            self.mids[mid][m] & PMD_TABLE == 0,
            "PMD already has a table"
        );
        self.mids[mid][m] = PMD_TABLE | self.leaves.len() as u64;
        self.leaves.push(ptes);
    }

    /// The huge PMDs whose 2 MiB range starts in [s, e), as (first vpn, pmd), in address
    /// order: one slot looked up per 2 MiB of the range.
    pub fn huge_pmds_in(&self, s: u32, e: u32) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let first = s.div_ceil(HPAGE_PMD_NR) as u64;
        let end = (e as u64).div_ceil(HPAGE_PMD_NR as u64);
        for pmd in first..end {
            let base = (pmd as u32) << LEVEL_BITS;
            let e = self.huge_pmd(base);
            if e != 0 {
                out.push((base, e));
            }
        }
        out
    }

    /// Every huge PMD as (first vpn, pmd), in address order.
    pub fn huge_pmds(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (t, &mid) in self.top.iter().enumerate() {
            if mid == NONE {
                continue;
            }
            for (m, &e) in self.mids[mid as usize].iter().enumerate() {
                if e != 0 && e & PMD_TABLE == 0 {
                    out.push((
                        ((t as u32) << (2 * LEVEL_BITS)) | ((m as u32) << LEVEL_BITS),
                        e,
                    ));
                }
            }
        }
        out
    }

    /// Every non-none PTE as (vpn, pte), in address order; a huge PMD gives one per 4 KiB
    /// page (checker and tests).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.top.iter().enumerate().flat_map(move |(t, &mid)| {
            let mids: &[u64] = if mid == NONE {
                &[]
            } else {
                &self.mids[mid as usize][..]
            };
            mids.iter().enumerate().flat_map(move |(m, &e)| {
                let base = ((t as u32) << (2 * LEVEL_BITS)) | ((m as u32) << LEVEL_BITS);
                let (ptes, huge): (&[u64], u64) = if e & PMD_TABLE != 0 {
                    (&self.leaves[(e as u32) as usize][..], 0)
                } else {
                    (&[], e)
                };
                let huge_count = if huge != 0 { 512 } else { 0 };
                ptes.iter()
                    .enumerate()
                    .filter(|(_, &p)| p != 0)
                    .map(move |(l, &p)| (base | l as u32, p))
                    .chain((0..huge_count).map(move |l| (base | l, huge_subpage(huge, l as usize))))
            })
        })
    }

    /// Every non-none PTE of the PTE tables only (no huge PMD), as (vpn, pte).
    pub fn iter_ptes(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.iter().filter(|&(_, p)| p & pte::HUGE == 0)
    }

    /// Bytes of page-table memory the simulator holds.
    pub fn bytes(&self) -> usize {
        self.top.len() * 4 + self.mids.len() * 512 * 8 + self.leaves.len() * 512 * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_iterate() {
        let mut pt = PageTable::new();
        assert_eq!(pt.get(12345), 0);
        assert!(pt.get_mut(12345).is_none());
        pt.set(12345, pte::mk(7, pte::PRESENT | pte::WRITE));
        pt.set(u32::MAX, pte::mk(9, pte::PRESENT));
        assert_eq!(pte::pfn(pt.get(12345)), 7);
        assert!(pte::present(pt.get(12345)));
        assert_eq!(pt.get(12346), 0);
        let all: Vec<_> = pt.iter().map(|(v, p)| (v, pte::pfn(p))).collect();
        assert_eq!(all, vec![(12345, 7), (u32::MAX, 9)]);
    }

    #[test]
    fn for_each_in_sees_what_get_sees() {
        let mut pt = PageTable::new();
        for v in [3u32, 511, 512, 1000, 5000, 1 << 18, (1 << 18) + 7] {
            pt.set(v, pte::mk(v, pte::PRESENT));
        }
        pt.set_huge_pmd(4 << 9, pte::mk(4096, pte::PRESENT | pte::HUGE));
        for (s, e) in [(0, 1 << 19), (4, 511), (511, 513), (2000, 2100), (7, 3000)] {
            let want: Vec<u64> = (s..e).map(|v| pt.get(v)).filter(|&p| p != 0).collect();
            let mut got = Vec::new();
            pt.for_each_in(s, e, |p| got.push(p));
            assert_eq!(got, want, "[{s}, {e})");
        }
    }

    #[test]
    fn ptes_are_eight_bytes() {
        assert_eq!(std::mem::size_of::<u64>(), 8);
        let mut pt = PageTable::new();
        for v in 0..512 {
            pt.set(v, pte::mk(v, pte::PRESENT));
        }
        // One leaf table of 512 PTEs costs 4 KiB, 8 bytes per PTE.
        let before = pt.bytes();
        pt.set(512, pte::PRESENT);
        assert_eq!(pt.bytes() - before, 512 * 8);
    }
}
