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

/// A page table: top → middle tables (indices of leaf tables) → leaf tables of PTEs.
pub struct PageTable {
    top: Vec<u32>,
    mids: Vec<[u32; 512]>,
    leaves: Vec<[u64; 512]>,
}

impl Default for PageTable {
    fn default() -> Self {
        Self::new()
    }
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

    /// The PTE for `vpn`, or 0 when no table covers it (the page walk).
    #[inline]
    pub fn get(&self, vpn: u32) -> u64 {
        let (t, m, l) = Self::split(vpn);
        self.leaf(t, m).map_or(0, |leaf| self.leaves[leaf][l])
    }

    /// A table that has given its memory back (a torn-down mm's): every PTE reads none.
    pub fn released() -> Self {
        PageTable {
            top: Vec::new(),
            mids: Vec::new(),
            leaves: Vec::new(),
        }
    }

    /// Whether a PTE table covers `vpn` (its PMD is populated).
    pub fn covers(&self, vpn: u32) -> bool {
        let (t, m, _) = Self::split(vpn);
        self.leaf(t, m).is_some()
    }

    /// The PTE table of top and middle indices `t`, `m`, if it exists.
    #[inline]
    fn leaf(&self, t: usize, m: usize) -> Option<usize> {
        let mid = *self.top.get(t)?;
        if mid == NONE {
            return None;
        }
        let leaf = self.mids[mid as usize][m];
        (leaf != NONE).then_some(leaf as usize)
    }

    /// Mutable PTE slot for `vpn` if its tables exist.
    #[inline]
    pub fn get_mut(&mut self, vpn: u32) -> Option<&mut u64> {
        let (t, m, l) = Self::split(vpn);
        let leaf = self.leaf(t, m)?;
        Some(&mut self.leaves[leaf][l])
    }

    /// The PTE slot for `vpn`, allocating tables on the way (__pte_alloc).
    pub fn entry(&mut self, vpn: u32) -> &mut u64 {
        let (t, m, l) = Self::split(vpn);
        if self.top[t] == NONE {
            self.top[t] = self.mids.len() as u32;
            self.mids.push([NONE; 512]);
        }
        let mid = self.top[t] as usize;
        if self.mids[mid][m] == NONE {
            self.mids[mid][m] = self.leaves.len() as u32;
            self.leaves.push([0; 512]);
        }
        let leaf = self.mids[mid][m] as usize;
        &mut self.leaves[leaf][l]
    }

    /// The PTE table under PMD entry `pmd` (vpn >> 9), if the PMD is populated (pmd_present).
    pub fn pte_table_mut(&mut self, pmd: u32) -> Option<&mut [u64; 512]> {
        let (t, m, _) = Self::split(pmd << LEVEL_BITS);
        let leaf = self.leaf(t, m)?;
        Some(&mut self.leaves[leaf])
    }

    pub fn set(&mut self, vpn: u32, val: u64) {
        *self.entry(vpn) = val;
    }

    /// Every non-none PTE as (vpn, pte), in address order (checker and tests).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.top.iter().enumerate().flat_map(move |(t, &mid)| {
            let mids: &[u32] = if mid == NONE {
                &[]
            } else {
                &self.mids[mid as usize][..]
            };
            mids.iter().enumerate().flat_map(move |(m, &leaf)| {
                let ptes: &[u64] = if leaf == NONE {
                    &[]
                } else {
                    &self.leaves[leaf as usize][..]
                };
                ptes.iter()
                    .enumerate()
                    .filter(|(_, &p)| p != 0)
                    .map(move |(l, &p)| {
                        (
                            ((t as u32) << (2 * LEVEL_BITS))
                                | ((m as u32) << LEVEL_BITS)
                                | l as u32,
                            p,
                        )
                    })
            })
        })
    }

    /// Bytes of page-table memory the simulator holds.
    pub fn bytes(&self) -> usize {
        self.top.len() * 4 + self.mids.len() * 512 * 4 + self.leaves.len() * 512 * 8
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
