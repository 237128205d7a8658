//! A per-CPU data-cache filter that decides which accesses reach memory: set-associative over
//! physical cache lines with bit-PLRU replacement, standing for the core's L2 plus its share of
//! the LLC. Only its hit/miss outcome matters; contents do not.

pub const LINE_SHIFT: u32 = 6;

#[derive(Clone, Debug)]
pub struct Cache {
    ways: usize,
    set_bits: u32,
    set_mask: u64,
    /// Partial tags: the low 15 bits of (line >> set_bits), plus a valid bit. Aliasing between
    /// lines whose tags agree in those bits is possible but rare (one in 32,768).
    tags: Vec<u16>,
    mru: Vec<u32>,
}

impl Cache {
    /// `kib` of capacity in `ways` ways; the set count must be a power of two (validated).
    pub fn new(kib: u32, ways: u32) -> Self {
        let lines = (kib as u64 * 1024) >> LINE_SHIFT;
        let sets = lines / ways as u64;
        assert!(sets.is_power_of_two() && ways <= 32);
        Cache {
            ways: ways as usize,
            set_bits: sets.trailing_zeros(),
            set_mask: sets - 1,
            tags: vec![0; lines as usize],
            mru: vec![0; sets as usize],
        }
    }

    /// Look up a physical line; on a miss it is filled. Returns whether it hit.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        let set = (line & self.set_mask) as usize;
        let tag = ((line >> self.set_bits) as u16 & 0x7fff) | 0x8000;
        let base = set * self.ways;
        let ways = &mut self.tags[base..base + self.ways];
        let all = if self.ways == 32 {
            u32::MAX
        } else {
            (1u32 << self.ways) - 1
        };
        // Match and empty masks without data-dependent branches (vectorisable).
        let (mut hit, mut empty) = (0u32, 0u32);
        for (i, &t) in ways.iter().enumerate() {
            hit |= ((t == tag) as u32) << i;
            empty |= ((t == 0) as u32) << i;
        }
        if hit != 0 {
            let w = hit.trailing_zeros() as usize;
            let bits = self.mru[set] | (1 << w);
            self.mru[set] = if bits == all { 1 << w } else { bits };
            return true;
        }
        let way = if empty != 0 {
            empty.trailing_zeros() as usize
        } else {
            (!self.mru[set]).trailing_zeros() as usize
        };
        ways[way] = tag;
        let bits = self.mru[set] | (1 << way);
        self.mru[set] = if bits == all { 1 << way } else { bits };
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_after_fill_and_capacity_misses_beyond_it() {
        // 64 KiB, 4 ways: 1024 lines in 256 sets.
        let mut c = Cache::new(64, 4);
        assert!(!c.access(7));
        assert!(c.access(7));
        for l in 0..1024 {
            c.access(l);
        }
        assert!((0..1024).all(|l| c.access(l)), "1024 lines fit");
        // Lines 0, 256, 512, 768, 1024 share set 0: the fifth evicts the least recent.
        assert!(!c.access(1024));
        assert!(!c.access(0), "line 0 was evicted");
    }
}
