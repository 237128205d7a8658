//! A set-associative TLB with PCID-tagged entries and bit-PLRU replacement (the LRU
//! approximation real TLBs use, and cheap enough for the hot path).
//!
//! A tag is two u32 words, the page number and the PCID with the page size and a valid bit,
//! held four ways to a 64-byte chunk with the four ways' payloads (and, in a set's first
//! chunk, the set's PLRU bits): a lookup compares a chunk's ways at once (two SSE2 compares),
//! a chunk at a time, and a hit in a set of up to 4 ways touches that one cache line.

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

/// Lanes of a tag chunk: four u32 compared at once (one SSE2 compare in the x86-64 baseline).
const LANES: usize = 4;

/// An entry's tag is two u32 lanes, compared together: the key (the virtual page number, or
/// the 2 MiB page number `vpn >> 9` of a huge entry) and the meta word, which holds the PCID,
/// the page size and a valid bit (0 = empty). A set's ways are `chunks` chunks of `LANES`
/// ways; the lanes beyond `ways` stay empty, and no lookup's meta is 0. A chunk is one cache
/// line: the lanes' payloads are beside their tags, and the set's bit-PLRU state in its
/// first chunk.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Chunk {
    key: [u32; LANES],
    meta: [u32; LANES],
    /// The lanes' payloads.
    data: [u32; LANES],
    /// One MRU bit per way of the set (bit-PLRU); used in a set's first chunk only.
    mru: u32,
}

impl Chunk {
    /// Bit i set where `lanes[i] == x`.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn mask(lanes: &[u32; LANES], x: u32) -> u32 {
        let mut m = 0u32;
        for (i, &l) in lanes.iter().enumerate() {
            m |= ((l == x) as u32) << i;
        }
        m
    }

    /// Bit i set where lane i holds (`key`, `meta`).
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn matches(&self, key: u32, meta: u32) -> u32 {
        Self::mask(&self.key, key) & Self::mask(&self.meta, meta)
    }

    /// Bit i set where lane i is empty.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn empty(&self) -> u32 {
        Self::mask(&self.meta, 0)
    }

    /// Bit i set where lane i holds (`key`, `meta`): two SSE2 compares and a move-mask
    /// (LLVM does not vectorise the scalar form, and scalar compares of both words cost the
    /// default scenario a quarter of its rate, measured).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn matches(&self, key: u32, meta: u32) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is in the x86-64 baseline; the loads read this chunk's 16-byte arrays.
        unsafe {
            let k = _mm_loadu_si128(self.key.as_ptr().cast());
            let m = _mm_loadu_si128(self.meta.as_ptr().cast());
            let eq = _mm_and_si128(
                _mm_cmpeq_epi32(k, _mm_set1_epi32(key as i32)),
                _mm_cmpeq_epi32(m, _mm_set1_epi32(meta as i32)),
            );
            _mm_movemask_ps(_mm_castsi128_ps(eq)) as u32
        }
    }

    /// Bit i set where lane i is empty.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn empty(&self) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: as in `matches`.
        unsafe {
            let m = _mm_loadu_si128(self.meta.as_ptr().cast());
            _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(m, _mm_setzero_si128()))) as u32
        }
    }
}

const VALID: u32 = 1 << 31;

/// A meta word's page-size bit: the entry maps a 2 MiB page, its number `vpn >> 9` the key
/// (an STLB holds both sizes; a 2 MiB L1 dTLB holds only these).
const HUGE_META: u32 = 1 << 30;

/// Meta word of a valid 4 KiB entry of `pcid`.
#[inline]
fn make_meta(pcid: u16) -> u32 {
    VALID | pcid as u32
}

/// 4 KiB pages in a 2 MiB page (HPAGE_PMD_NR).
pub const HUGE_PAGES: u32 = 512;

#[inline]
fn make_huge_meta(pcid: u16) -> u32 {
    make_meta(pcid) | HUGE_META
}

/// A set's bit-PLRU bits `mru` after a use of `way`: its bit set, or only its bit once every
/// way's would be (`all_ways`).
#[inline(always)]
fn plru_touch(mru: u32, way: usize, all_ways: u32) -> u32 {
    let bits = mru | (1 << way);
    if bits == all_ways {
        1 << way
    } else {
        bits
    }
}

#[derive(Clone, Debug)]
pub struct Tlb {
    ways: usize,
    /// `LANES`-wide chunks per set.
    chunks: usize,
    set_mask: u32,
    /// The `ways` low bits.
    all_ways: u32,
    /// `chunks` per set; an entry's index is set × `chunks` × `LANES` + way.
    tags: Vec<Chunk>,
    sets: usize,
    /// Ways holding no entry, over all sets: while there are none, `insert` goes straight to
    /// the PLRU victim (a full TLB, the steady state, has no empty way to look for).
    empty_ways: usize,
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
        let chunks = (ways as usize).div_ceil(LANES);
        Tlb {
            ways: ways as usize,
            chunks,
            set_mask: sets - 1,
            all_ways: if ways == 32 {
                u32::MAX
            } else {
                (1u32 << ways) - 1
            },
            tags: vec![Chunk::default(); sets as usize * chunks],
            sets: sets as usize,
            empty_ways: entries as usize,
        }
    }

    pub fn entries(&self) -> usize {
        self.sets * self.ways
    }

    #[inline]
    fn set_of(&self, vpn: u32) -> usize {
        (vpn & self.set_mask) as usize
    }

    #[inline]
    fn touch(&mut self, set: usize, way: usize) {
        let mru = &mut self.tags[set * self.chunks].mru;
        *mru = plru_touch(*mru, way, self.all_ways);
    }

    /// The ways of `set` holding (`key`, `meta`), as a bit mask.
    #[inline(always)]
    fn find(&self, set: usize, key: u32, meta: u32) -> u32 {
        // The first chunk apart: an L1 TLB of up to 4 ways has no loop to run.
        let base = set * self.chunks;
        let mut hits = self.tags[base].matches(key, meta);
        for c in 1..self.chunks {
            hits |= self.tags[base + c].matches(key, meta) << (c * LANES);
        }
        hits
    }

    /// The entry index of `way` of `set`.
    #[inline(always)]
    fn index(&self, set: usize, way: usize) -> usize {
        set * self.chunks * LANES + way
    }

    #[inline(always)]
    fn meta_mut(&mut self, idx: usize) -> &mut u32 {
        &mut self.tags[idx / LANES].meta[idx % LANES]
    }

    /// Look up (`key`, `meta`); on a hit, returns the entry index and marks it recently used.
    /// The ways are compared a chunk at a time, without a data-dependent branch, so a hit in
    /// any way costs the same.
    #[inline(always)]
    fn lookup_meta(&mut self, key: u32, meta: u32) -> Option<usize> {
        let set = self.set_of(key);
        let hits = self.find(set, key, meta);
        if hits == 0 {
            return None;
        }
        let found = hits.trailing_zeros() as usize;
        self.touch(set, found);
        Some(self.index(set, found))
    }

    /// `lookup` for the payload alone (the engine's fast path). The payload is read before
    /// the PLRU bits are written, so the set's position is computed once: after a store to
    /// the bits the compiler reloads the TLB's geometry and recomputes it.
    #[inline(always)]
    pub fn lookup_data(&mut self, vpn: u32, pcid: u16) -> Option<u32> {
        let set = self.set_of(vpn);
        let hits = self.find(set, vpn, make_meta(pcid));
        if hits == 0 {
            return None;
        }
        let found = hits.trailing_zeros() as usize;
        let data = self.data(self.index(set, found));
        self.touch(set, found);
        Some(data)
    }

    /// Look up a translation; on a hit, returns the entry index and marks it recently used.
    #[inline]
    pub fn lookup(&mut self, vpn: u32, pcid: u16) -> Option<usize> {
        self.lookup_meta(vpn, make_meta(pcid))
    }

    /// Look up the 2 MiB translation of huge page `hvpn` (vpn >> 9), as `lookup` does.
    #[inline]
    pub fn lookup_huge(&mut self, hvpn: u32, pcid: u16) -> Option<usize> {
        self.lookup_meta(hvpn, make_huge_meta(pcid))
    }

    /// Insert or refresh the 2 MiB translation of huge page `hvpn`; `data` names its first
    /// frame.
    pub fn insert_huge(&mut self, hvpn: u32, pcid: u16, data: u32) {
        match self.lookup_huge(hvpn, pcid) {
            Some(i) => self.set_data(i, data),
            None => {
                self.insert_meta(hvpn, make_huge_meta(pcid), data);
            }
        }
    }

    #[inline]
    pub fn data(&self, idx: usize) -> u32 {
        self.tags[idx / LANES].data[idx % LANES]
    }

    #[inline]
    pub fn set_data(&mut self, idx: usize, data: u32) {
        self.tags[idx / LANES].data[idx % LANES] = data;
    }

    /// Insert a translation (the caller has checked it is absent); evicts the bit-PLRU victim.
    #[inline(always)]
    pub fn insert(&mut self, vpn: u32, pcid: u16, data: u32) -> usize {
        self.insert_meta(vpn, make_meta(pcid), data)
    }

    #[inline(always)]
    fn insert_meta(&mut self, key: u32, meta: u32, data: u32) -> usize {
        let (chunks, all_ways) = (self.chunks, self.all_ways);
        let base = self.set_of(key) * chunks;
        // The chunks as a local slice: its pointer and length stay in registers across the
        // stores below (through `self.tags` they are reloaded after each).
        let tags = &mut self.tags[..];
        let mut empty = 0;
        if self.empty_ways > 0 {
            // The first chunk apart, as in `find`: an L1 TLB of up to 4 ways has no loop.
            empty = tags[base].empty();
            for c in 1..chunks {
                empty |= tags[base + c].empty() << (c * LANES);
            }
            empty &= all_ways;
        }
        let way = if empty != 0 {
            self.empty_ways -= 1;
            empty.trailing_zeros()
        } else {
            (!tags[base].mru).trailing_zeros()
        } as usize;
        let chunk = &mut tags[base + way / LANES];
        chunk.key[way % LANES] = key;
        chunk.meta[way % LANES] = meta;
        chunk.data[way % LANES] = data;
        let mru = &mut tags[base].mru;
        *mru = plru_touch(*mru, way, all_ways);
        base * LANES + way
    }

    /// Update the payload of an existing entry, if present (no replacement-state change).
    #[inline]
    pub fn update(&mut self, vpn: u32, pcid: u16, data: u32) {
        let set = self.set_of(vpn);
        let hits = self.find(set, vpn, make_meta(pcid));
        if hits != 0 {
            let idx = self.index(set, hits.trailing_zeros() as usize);
            self.set_data(idx, data);
        }
    }

    /// INVLPG for one PCID: drop the entry that translates `vpn`, of either page size, if
    /// present. Returns whether one was dropped.
    pub fn invalidate_page(&mut self, vpn: u32, pcid: u16) -> bool {
        let mut dropped = false;
        for (key, meta) in [(vpn, make_meta(pcid)), (vpn >> 9, make_huge_meta(pcid))] {
            let set = self.set_of(key);
            let mut hits = self.find(set, key, meta);
            while hits != 0 {
                let idx = self.index(set, hits.trailing_zeros() as usize);
                *self.meta_mut(idx) = 0;
                self.empty_ways += 1;
                hits &= hits - 1;
                dropped = true;
            }
        }
        dropped
    }

    /// Drop every entry of one PCID (INVPCID single-context / CR3 write without NOFLUSH).
    pub fn flush_pcid(&mut self, pcid: u16) {
        for m in self.tags.iter_mut().flat_map(|c| c.meta.iter_mut()) {
            if *m != 0 && (*m & 0xffff) as u16 == pcid {
                *m = 0;
                self.empty_ways += 1;
            }
        }
    }

    /// Drop every entry (INVPCID all-context).
    pub fn flush_all(&mut self) {
        self.tags.iter_mut().for_each(|c| {
            c.meta = [0; LANES];
            c.mru = 0;
        });
        self.empty_ways = self.entries();
    }

    /// Valid entries as (first vpn, pcid, data, pages translated: 1 or 512), for the
    /// invariant checker and tests.
    pub fn valid_entries(&self) -> impl Iterator<Item = (u32, u16, u32, u32)> + '_ {
        (0..self.sets)
            .flat_map(move |set| (0..self.ways).map(move |way| self.index(set, way)))
            .filter_map(move |idx| {
                let chunk = &self.tags[idx / LANES];
                let (key, meta) = (chunk.key[idx % LANES], chunk.meta[idx % LANES]);
                let pcid = (meta & 0xffff) as u16;
                let d = chunk.data[idx % LANES];
                if meta == 0 {
                    None
                } else if meta & HUGE_META != 0 {
                    Some((key << 9, pcid, d, HUGE_PAGES))
                } else {
                    Some((key, pcid, d, 1))
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
    fn ways_that_do_not_fill_a_chunk_use_only_their_lanes() {
        // 4 sets × 6 ways: two 4-lane chunks per set, lanes 6 and 7 padding.
        let mut t = Tlb::new(24, 6);
        assert_eq!(t.entries(), 24);
        let set0: Vec<u32> = (0..7).map(|i| i * 4).collect();
        for &v in &set0[..6] {
            t.insert(v, 3, v);
        }
        assert!(set0[..6].iter().all(|&v| t.lookup(v, 3).is_some()));
        assert!(t.lookup(set0[0], 4).is_none(), "another PCID");
        // The lookups left ways 4 and 5 marked (bit-PLRU): way 0 is the victim.
        t.insert(set0[6], 3, 0);
        assert!(t.lookup(set0[0], 3).is_none());
        assert_eq!(t.valid_entries().count(), 6);
        let firsts: Vec<u32> = t.valid_entries().map(|e| e.0).collect();
        assert_eq!(firsts, vec![24, 4, 8, 12, 16, 20], "set then way order");
        // 12 ways (the default STLB): three chunks.
        let mut t = Tlb::new(48, 12);
        for v in 0..48 {
            t.insert(v, 1, v);
        }
        assert!((0..48).all(|v| t.lookup(v, 1).is_some_and(|i| t.data(i) == v)));
        assert!((0..48).all(|v| t.lookup_data(v, 1) == Some(v)));
        assert_eq!(t.lookup_data(0, 2), None, "another PCID");
        assert!(t.invalidate_page(47, 1));
        assert!(t.lookup(47, 1).is_none() && t.lookup(43, 1).is_some());
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

    /// The count of empty ways follows every insert, INVLPG and flush, so a full TLB inserts
    /// over its PLRU victim and one with a hole still finds the hole.
    #[test]
    fn empty_ways_follow_inserts_invalidations_and_flushes() {
        use rand::{Rng, SeedableRng};
        for (entries, ways) in [(64, 4), (48, 12), (24, 6), (8, 8)] {
            let mut t = Tlb::new(entries, ways);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(entries as u64);
            for step in 0..20_000 {
                let (vpn, pcid) = (rng.gen_range(0..256u32), rng.gen_range(0..3u16));
                match rng.gen_range(0..100) {
                    0..=69 => {
                        if t.lookup(vpn, pcid).is_none() {
                            t.insert(vpn, pcid, tlb_data(vpn, true, false));
                        }
                    }
                    70..=79 => {
                        if t.lookup_huge(vpn >> 4, pcid).is_none() {
                            t.insert_huge(vpn >> 4, pcid, 7);
                        }
                    }
                    80..=97 => {
                        t.invalidate_page(vpn, pcid);
                    }
                    98 => t.flush_pcid(pcid),
                    _ => t.flush_all(),
                }
                let valid = t.valid_entries().count();
                assert_eq!(t.empty_ways, entries as usize - valid, "step {step}");
            }
        }
        // A hole in a full TLB is found: the insert takes it, not the set's PLRU victim.
        let mut t = Tlb::new(8, 2);
        for vpn in 0..8 {
            t.insert(vpn, 0, 0);
        }
        assert_eq!(t.empty_ways, 0);
        assert!(t.invalidate_page(4, 0));
        t.insert(8, 0, 0);
        assert!(t.lookup(0, 0).is_some() && t.lookup(8, 0).is_some());
    }
}
