//! A set-associative TLB with PCID-tagged entries and bit-PLRU replacement (the LRU
//! approximation real TLBs use, and cheap enough for the hot path).
//!
//! Entries are split into a tag array (scanned on every lookup) and a data array (read on a
//! hit), so a lookup touches one cache line of tags per set.

/// Entry payload: `pfn << 2 | WRITE | DIRTY`, the translation and the permission bits the TLB caches.
pub const TLB_WRITE: u32 = 1 << 1;
pub const TLB_DIRTY: u32 = 1 << 0;

#[inline]
pub fn tlb_data(pfn: u32, write: bool, dirty: bool) -> u32 {
    (pfn << 2) | ((write as u32) << 1) | dirty as u32
}

#[inline]
pub fn tlb_pfn(data: u32) -> u32 {
    data >> 2
}

/// Tag of a valid entry: the virtual page number and PCID, with a valid bit (0 = empty).
#[inline]
fn make_tag(vpn: u32, pcid: u16) -> u64 {
    (1u64 << 63) | ((vpn as u64) << 16) | pcid as u64
}

/// A tag's page-size bit: the entry maps a 2 MiB page, its number `vpn >> 9` in the vpn field
/// (an STLB holds both sizes; a 2 MiB L1 dTLB holds only these).
const HUGE_TAG: u64 = 1 << 62;

/// 4 KiB pages in a 2 MiB page (HPAGE_PMD_NR).
pub const HUGE_PAGES: u32 = 512;

#[inline]
fn make_huge_tag(hvpn: u32, pcid: u16) -> u64 {
    make_tag(hvpn, pcid) | HUGE_TAG
}

#[derive(Clone, Debug)]
pub struct Tlb {
    ways: usize,
    set_mask: u32,
    tags: Vec<u64>,
    data: Vec<u32>,
    /// One MRU bit per way per set (bit-PLRU).
    mru: Vec<u32>,
}

impl Tlb {
    /// `entries` must be `ways` × a power of two (checked by config validation).
    pub fn new(entries: u32, ways: u32) -> Self {
        assert!(ways > 0 && ways <= 32 && entries.is_multiple_of(ways));
        let sets = entries / ways;
        assert!(
            sets.is_power_of_two(),
            "TLB set count must be a power of two"
        );
        Tlb {
            ways: ways as usize,
            set_mask: sets - 1,
            tags: vec![0; entries as usize],
            data: vec![0; entries as usize],
            mru: vec![0; sets as usize],
        }
    }

    pub fn entries(&self) -> usize {
        self.tags.len()
    }

    #[inline]
    fn set_of(&self, vpn: u32) -> usize {
        (vpn & self.set_mask) as usize
    }

    #[inline]
    fn touch(&mut self, set: usize, way: usize) {
        let all = if self.ways == 32 {
            u32::MAX
        } else {
            (1u32 << self.ways) - 1
        };
        let bits = self.mru[set] | (1 << way);
        self.mru[set] = if bits == all { 1 << way } else { bits };
    }

    /// Look up a translation; on a hit, returns the entry index and marks it recently used.
    /// The ways are compared without a data-dependent branch (a match mask the compiler can
    /// vectorise), so a hit in any way costs the same.
    #[inline]
    pub fn lookup(&mut self, vpn: u32, pcid: u16) -> Option<usize> {
        let set = self.set_of(vpn);
        let base = set * self.ways;
        let tag = make_tag(vpn, pcid);
        let mut hits = 0u32;
        for (i, &t) in self.tags[base..base + self.ways].iter().enumerate() {
            hits |= ((t == tag) as u32) << i;
        }
        if hits == 0 {
            return None;
        }
        let found = hits.trailing_zeros() as usize;
        self.touch(set, found);
        Some(base + found)
    }

    /// Look up the 2 MiB translation of huge page `hvpn` (vpn >> 9), as `lookup` does.
    #[inline]
    pub fn lookup_huge(&mut self, hvpn: u32, pcid: u16) -> Option<usize> {
        let set = self.set_of(hvpn);
        let base = set * self.ways;
        let tag = make_huge_tag(hvpn, pcid);
        let found = self.tags[base..base + self.ways]
            .iter()
            .position(|&t| t == tag)?;
        self.touch(set, found);
        Some(base + found)
    }

    /// Insert or refresh the 2 MiB translation of huge page `hvpn`; `data` names its first
    /// frame.
    pub fn insert_huge(&mut self, hvpn: u32, pcid: u16, data: u32) {
        match self.lookup_huge(hvpn, pcid) {
            Some(i) => self.data[i] = data,
            None => {
                let idx = self.insert(hvpn, pcid, data);
                self.tags[idx] |= HUGE_TAG;
            }
        }
    }

    #[inline]
    pub fn data(&self, idx: usize) -> u32 {
        self.data[idx]
    }

    #[inline]
    pub fn set_data(&mut self, idx: usize, data: u32) {
        self.data[idx] = data;
    }

    /// Insert a translation (the caller has checked it is absent); evicts the bit-PLRU victim.
    #[inline]
    pub fn insert(&mut self, vpn: u32, pcid: u16, data: u32) -> usize {
        let set = self.set_of(vpn);
        let base = set * self.ways;
        let slots = &self.tags[base..base + self.ways];
        let way = match slots.iter().position(|&t| t == 0) {
            Some(w) => w,
            None => (!self.mru[set]).trailing_zeros() as usize,
        };
        let idx = base + way;
        self.tags[idx] = make_tag(vpn, pcid);
        self.data[idx] = data;
        self.touch(set, way);
        idx
    }

    /// Update the payload of an existing entry, if present (no replacement-state change).
    #[inline]
    pub fn update(&mut self, vpn: u32, pcid: u16, data: u32) {
        let set = self.set_of(vpn);
        let base = set * self.ways;
        let tag = make_tag(vpn, pcid);
        if let Some(w) = self.tags[base..base + self.ways]
            .iter()
            .position(|&t| t == tag)
        {
            self.data[base + w] = data;
        }
    }

    /// INVLPG for one PCID: drop the entry that translates `vpn`, of either page size, if
    /// present. Returns whether one was dropped.
    pub fn invalidate_page(&mut self, vpn: u32, pcid: u16) -> bool {
        let mut dropped = false;
        for (key, tag) in [
            (vpn, make_tag(vpn, pcid)),
            (vpn >> 9, make_huge_tag(vpn >> 9, pcid)),
        ] {
            let base = self.set_of(key) * self.ways;
            for i in base..base + self.ways {
                if self.tags[i] == tag {
                    self.tags[i] = 0;
                    dropped = true;
                }
            }
        }
        dropped
    }

    /// Drop every entry of one PCID (INVPCID single-context / CR3 write without NOFLUSH).
    pub fn flush_pcid(&mut self, pcid: u16) {
        for t in self.tags.iter_mut() {
            if *t != 0 && (*t & 0xffff) as u16 == pcid {
                *t = 0;
            }
        }
    }

    /// Drop every entry (INVPCID all-context).
    pub fn flush_all(&mut self) {
        self.tags.iter_mut().for_each(|t| *t = 0);
        self.mru.iter_mut().for_each(|m| *m = 0);
    }

    /// Valid entries as (first vpn, pcid, data, pages translated: 1 or 512), for the
    /// invariant checker and tests.
    pub fn valid_entries(&self) -> impl Iterator<Item = (u32, u16, u32, u32)> + '_ {
        self.tags
            .iter()
            .zip(self.data.iter())
            .filter(|(t, _)| **t != 0)
            .map(|(t, d)| {
                let key = ((*t >> 16) & 0xffff_ffff) as u32;
                let pcid = (*t & 0xffff) as u16;
                if *t & HUGE_TAG != 0 {
                    (key << 9, pcid, *d, HUGE_PAGES)
                } else {
                    (key, pcid, *d, 1)
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_after_insert_and_miss_for_other_pages() {
        let mut t = Tlb::new(64, 4);
        assert!(t.lookup(5, 0).is_none());
        t.insert(5, 0, tlb_data(77, true, false));
        let i = t.lookup(5, 0).expect("hit");
        assert_eq!(tlb_pfn(t.data(i)), 77);
        assert_eq!(t.data(i) & TLB_WRITE, TLB_WRITE);
        assert!(t.lookup(6, 0).is_none());
    }

    #[test]
    fn pcid_tags_keep_address_spaces_apart() {
        let mut t = Tlb::new(64, 4);
        t.insert(5, 1, tlb_data(10, false, false));
        t.insert(5, 2, tlb_data(20, false, false));
        let i1 = t.lookup(5, 1).unwrap();
        assert_eq!(tlb_pfn(t.data(i1)), 10);
        let i2 = t.lookup(5, 2).unwrap();
        assert_eq!(tlb_pfn(t.data(i2)), 20);
        t.flush_pcid(1);
        assert!(t.lookup(5, 1).is_none());
        assert!(
            t.lookup(5, 2).is_some(),
            "flushing one PCID must keep the others"
        );
    }

    #[test]
    fn replacement_evicts_least_recently_used_way() {
        // 16 sets × 4 ways: vpns 0,16,32,48,64 share set 0.
        let mut t = Tlb::new(64, 4);
        for v in [0, 16, 32, 48] {
            t.insert(v, 0, 0);
        }
        // Touch 0 again: LRU order is now 16 (oldest), 32, 48, 0.
        assert!(t.lookup(0, 0).is_some());
        t.insert(64, 0, 0);
        assert!(t.lookup(16, 0).is_none(), "16 was least recently used");
        assert!(t.lookup(0, 0).is_some());
        // Sequential fill of a fresh set evicts in insertion order.
        let mut t = Tlb::new(64, 4);
        for v in [1, 17, 33, 49, 65] {
            t.insert(v, 0, 0);
        }
        assert!(t.lookup(1, 0).is_none());
        for v in [17, 33, 49, 65] {
            assert!(t.lookup(v, 0).is_some());
        }
    }

    #[test]
    fn capacity_is_entries_times_sets() {
        let mut t = Tlb::new(64, 4);
        for v in 0..64 {
            t.insert(v, 0, 0);
        }
        assert_eq!(t.valid_entries().count(), 64);
        assert!((0..64).all(|v| t.lookup(v, 0).is_some()));
        t.insert(64, 0, 0);
        assert_eq!(t.valid_entries().count(), 64);
    }

    #[test]
    fn huge_entries_share_the_stlb_and_invlpg_drops_them() {
        let mut t = Tlb::new(64, 4);
        t.insert_huge(3, 1, tlb_data(1024, true, true));
        t.insert(3, 1, tlb_data(7, false, false));
        assert!(t.lookup_huge(3, 1).is_some());
        assert!(t.lookup_huge(3, 2).is_none(), "PCIDs apart");
        let small = t.lookup(3, 1).unwrap();
        assert_eq!(tlb_pfn(t.data(small)), 7, "sizes apart");
        let huge: Vec<_> = t.valid_entries().filter(|e| e.3 == 512).collect();
        assert_eq!(huge, vec![(3 << 9, 1, tlb_data(1024, true, true), 512)]);
        // INVLPG of any address inside the 2 MiB page drops the 2 MiB entry.
        assert!(t.invalidate_page((3 << 9) + 100, 1));
        assert!(t.lookup_huge(3, 1).is_none());
        assert!(
            t.lookup(3, 1).is_some(),
            "the 4 KiB page 3 is another address"
        );
    }

    #[test]
    fn invalidate_page_and_flush_all() {
        let mut t = Tlb::new(16, 4);
        t.insert(3, 0, 0);
        t.insert(4, 0, 0);
        assert!(t.invalidate_page(3, 0));
        assert!(!t.invalidate_page(3, 0));
        assert!(t.lookup(4, 0).is_some());
        t.flush_all();
        assert_eq!(t.valid_entries().count(), 0);
    }
}
