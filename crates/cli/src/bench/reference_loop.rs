//! The tuned reference loop: per access an L1 TLB lookup (iTLB for instruction fetches, dTLB
//! otherwise), then the STLB, then a three-level page walk, with the fills a hit or a walk
//! makes — nothing else. Same geometry and bit-PLRU replacement as `machine/tlb.rs`, so it
//! walks as often as the simulator does, but each set's tags are one array of `LANES` u32
//! compared at once, with one ASID and no permission or dirty bits to check.

/// (entries, ways) of each TLB.
pub struct Geometry {
    pub dtlb: (u32, u32),
    pub itlb: (u32, u32),
    pub stlb: (u32, u32),
}

/// What a pass did: the walks and STLB hits (to set beside the run's perf counters) and a
/// checksum of the frames it translated to (so the compiler keeps the work).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub walks: u64,
    pub stlb_hits: u64,
    pub checksum: u64,
}

const LEVEL: u32 = 9;
const TOP: usize = 1 << (32 - 2 * LEVEL);

/// One process's page table, every recorded page mapped: top → PMD tables → PTE tables.
struct PageTable {
    top: Box<[u32; TOP]>,
    mids: Vec<[u32; 512]>,
    leaves: Vec<[u64; 512]>,
}

/// x86 PTE bits of a mapped, accessed, dirty, writable page; the frame from bit 12.
const PTE_BITS: u64 = 0b1111;

impl PageTable {
    fn new() -> Self {
        PageTable {
            top: Box::new([u32::MAX; TOP]),
            mids: Vec::new(),
            leaves: Vec::new(),
        }
    }

    fn map(&mut self, vpn: u32, pfn: &mut u64) {
        let t = (vpn >> (2 * LEVEL)) as usize;
        if self.top[t] == u32::MAX {
            self.top[t] = self.mids.len() as u32;
            self.mids.push([u32::MAX; 512]);
        }
        let mid = &mut self.mids[self.top[t] as usize][((vpn >> LEVEL) & 511) as usize];
        if *mid == u32::MAX {
            *mid = self.leaves.len() as u32;
            self.leaves.push([0; 512]);
        }
        let pte = &mut self.leaves[*mid as usize][(vpn & 511) as usize];
        if *pte == 0 {
            *pte = (*pfn << 12) | PTE_BITS;
            *pfn += 1;
        }
    }

    /// The hardware walk: three dependent loads, the frame number.
    #[inline(always)]
    fn walk(&self, vpn: u32) -> u32 {
        let mid = self.top[(vpn >> (2 * LEVEL)) as usize % TOP];
        let leaf = self.mids[mid as usize][((vpn >> LEVEL) & 511) as usize];
        (self.leaves[leaf as usize][(vpn & 511) as usize] >> 12) as u32
    }
}

/// Every workload thread's recorded page stream.
#[derive(Default)]
pub struct Recorded {
    /// Per thread: the page of each load, store or instruction fetch, in program order.
    pub streams: Vec<Vec<u32>>,
    /// Per thread: the positions of its instruction fetches in `streams` (they go through
    /// the iTLB), ascending.
    pub fetches: Vec<Vec<u32>>,
    /// Per thread: its process (each process has a page table of its own).
    pub process: Vec<u32>,
}

/// The page tables of every process, built before the timed loop.
pub struct PageTables(Vec<PageTable>);

impl PageTables {
    pub fn build(rec: &Recorded) -> Self {
        let n = rec
            .process
            .iter()
            .map(|&p| p as usize + 1)
            .max()
            .unwrap_or(0);
        let mut tables: Vec<PageTable> = (0..n).map(|_| PageTable::new()).collect();
        let mut pfn = 1u64;
        for (s, &p) in rec.streams.iter().zip(&rec.process) {
            for &e in s {
                tables[p as usize].map(e, &mut pfn);
            }
        }
        PageTables(tables)
    }
}

/// A set-associative TLB whose sets are `LANES`-wide tag arrays (`ways` of them used; the
/// rest stay 0, which no tag equals): a lookup is one compare of the whole set.
struct Tlb<const LANES: usize> {
    tags: Vec<[u32; LANES]>,
    data: Vec<[u32; LANES]>,
    mru: Vec<u32>,
    set_mask: u32,
    all_ways: u32,
}

impl<const LANES: usize> Tlb<LANES> {
    fn new((entries, ways): (u32, u32)) -> Self {
        let sets = (entries / ways) as usize;
        Tlb {
            tags: vec![[0; LANES]; sets],
            data: vec![[0; LANES]; sets],
            mru: vec![0; sets],
            set_mask: sets as u32 - 1,
            all_ways: if ways == 32 {
                u32::MAX
            } else {
                (1 << ways) - 1
            },
        }
    }

    /// Bit i set where lane i holds `tag`.
    #[inline(always)]
    fn matches(lanes: &[u32; LANES], tag: u32) -> u32 {
        let mut m = 0u32;
        for (i, &t) in lanes.iter().enumerate() {
            m |= ((t == tag) as u32) << i;
        }
        m
    }

    /// Bit-PLRU: mark `way` used; when every way is marked, only it stays marked.
    #[inline(always)]
    fn touch(&mut self, set: usize, way: usize) {
        let bits = self.mru[set] | (1 << way);
        self.mru[set] = if bits == self.all_ways {
            1 << way
        } else {
            bits
        };
    }

    #[inline(always)]
    fn lookup(&mut self, vpn: u32) -> Option<u32> {
        let set = (vpn & self.set_mask) as usize;
        let hits = Self::matches(&self.tags[set], vpn + 1);
        if hits == 0 {
            return None;
        }
        let way = hits.trailing_zeros() as usize;
        self.touch(set, way);
        Some(self.data[set][way])
    }

    #[inline(always)]
    fn insert(&mut self, vpn: u32, pfn: u32) {
        let set = (vpn & self.set_mask) as usize;
        let empty = Self::matches(&self.tags[set], 0) & self.all_ways;
        let way = if empty != 0 {
            empty.trailing_zeros()
        } else {
            (!self.mru[set]).trailing_zeros()
        } as usize;
        self.tags[set][way] = vpn + 1;
        self.data[set][way] = pfn;
        self.touch(set, way);
    }
}

/// Every thread's stream through TLBs of its own (a pinned thread's CPU), a thread at a time.
fn run_with<const L1: usize, const S: usize>(
    rec: &Recorded,
    tables: &PageTables,
    g: &Geometry,
) -> Outcome {
    let mut out = Outcome::default();
    let threads = rec.streams.iter().zip(&rec.fetches).zip(&rec.process);
    for ((stream, fetch), &p) in threads {
        let pt = &tables.0[p as usize];
        let mut dtlb = Tlb::<L1>::new(g.dtlb);
        let mut itlb = Tlb::<L1>::new(g.itlb);
        let mut stlb = Tlb::<S>::new(g.stlb);
        let mut fetch = fetch.iter().copied().chain(std::iter::once(u32::MAX));
        let mut next_fetch = fetch.next().unwrap_or(u32::MAX);
        for (i, &vpn) in stream.iter().enumerate() {
            let l1 = if i as u32 == next_fetch {
                next_fetch = fetch.next().unwrap_or(u32::MAX);
                &mut itlb
            } else {
                &mut dtlb
            };
            let pfn = match l1.lookup(vpn) {
                Some(pfn) => pfn,
                None => match stlb.lookup(vpn) {
                    Some(pfn) => {
                        out.stlb_hits += 1;
                        l1.insert(vpn, pfn);
                        pfn
                    }
                    None => {
                        out.walks += 1;
                        let pfn = pt.walk(vpn);
                        l1.insert(vpn, pfn);
                        stlb.insert(vpn, pfn);
                        pfn
                    }
                },
            };
            out.checksum = out.checksum.wrapping_add(pfn as u64);
        }
    }
    out
}

/// Lanes for a TLB of `ways` ways: the next power of two from 4.
fn lanes(ways: u32) -> usize {
    ways.max(4).next_power_of_two() as usize
}

/// The timed pass, its lane widths picked once for the geometry.
pub fn run(rec: &Recorded, tables: &PageTables, g: &Geometry) -> Outcome {
    macro_rules! pick {
        ($($l:literal),*) => {
            match (lanes(g.dtlb.1.max(g.itlb.1)), lanes(g.stlb.1)) {
                $(
                    ($l, 4) => run_with::<$l, 4>(rec, tables, g),
                    ($l, 8) => run_with::<$l, 8>(rec, tables, g),
                    ($l, 16) => run_with::<$l, 16>(rec, tables, g),
                    ($l, 32) => run_with::<$l, 32>(rec, tables, g),
                )*
                (l, s) => unreachable!("TLB ways above 32 ({l}, {s}): config validation allows 32"),
            }
        };
    }
    pick!(4, 8, 16, 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_once_per_page_that_fits_and_again_after_eviction() {
        let g = Geometry {
            dtlb: (4, 4),
            itlb: (8, 8),
            stlb: (8, 4),
        };
        // 4 pages fit the L1; a fifth in the same STLB set pair evicts.
        let rec = Recorded {
            streams: vec![vec![1, 2, 3, 4, 1, 2, 3, 4, 1]],
            fetches: vec![vec![8]],
            process: vec![0],
        };
        let t = PageTables::build(&rec);
        let o = run(&rec, &t, &g);
        assert_eq!(o.walks, 4);
        assert_eq!(o.stlb_hits, 1, "the fetch finds page 1 in the STLB");
        assert_eq!(o.checksum, 1 + 2 + 3 + 4 + 1 + 2 + 3 + 4 + 1);
    }

    #[test]
    fn matches_the_simulators_tlb_replacement() {
        // The same sequence through tierlab's Tlb and this one: the same hits.
        let mut sim = tierlab::machine::tlb::Tlb::new(64, 4);
        let mut r = Tlb::<4>::new((64, 4));
        let mut x = 12345u32;
        for _ in 0..10_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let vpn = (x >> 8) % 300;
            let a = sim.lookup(vpn, 0).is_some();
            let b = r.lookup(vpn).is_some();
            assert_eq!(a, b);
            if !a {
                sim.insert(vpn, 0, 0);
                r.insert(vpn, 0);
            }
        }
    }
}
