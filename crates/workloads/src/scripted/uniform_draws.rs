//! A uniform access phase's addresses, `gen_range(0..pages)` then `gen_range(0..PAGE / 8)` per
//! access, drawn as rand 0.8 draws them (`UniformInt::sample_single_inclusive`: a u64 word per
//! try, `hi` of `word × range` accepted when `lo` is within the zone) but without its
//! rejection branch: with the zone's fast approximation half the words of a power-of-two range
//! are rejected, at random, so that branch mispredicted on every other word. Here each word is
//! one step of a two-state machine (page draw, offset draw) whose moves are selects.

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::PAGE;

/// rand 0.8's rejection zone for `gen_range` over `range` values of a u64 (the "conservative
/// but fast approximation").
#[inline]
fn zone(range: u64) -> u64 {
    (range << range.leading_zeros()).wrapping_sub(1)
}

/// The next `k` addresses `start + page * PAGE + word * 8` of a uniform phase over `pages`
/// pages, each passed to `emit` in batches; the generator ends where `k` rounds of
/// `gen_range(0..pages)`, `gen_range(0..PAGE / 8)` leave it.
#[inline]
pub(super) fn uniform_addrs(
    rng: &mut ChaCha8Rng,
    start: u64,
    pages: u64,
    k: u64,
    mut emit: impl FnMut(&[u64]),
) {
    debug_assert!(pages > 0);
    let (zone_page, words) = (zone(pages), PAGE / 8);
    let zone_word = zone(words);
    let mut buf = [0u64; 64];
    let (mut n, mut left) = (0usize, k);
    // Whether the next accepted draw is the offset (else the page), and the page drawn.
    let (mut offset, mut page) = (false, 0u64);
    while left > 0 {
        let v = rng.next_u64();
        // Both draws' verdicts, so that the state's chain is a select and an xor, not a
        // multiply and a compare.
        let (mp, mw) = (v as u128 * pages as u128, v as u128 * words as u128);
        let accept_page = mp as u64 <= zone_page;
        let accept_word = mw as u64 <= zone_word;
        let accept = (offset & accept_word) | (!offset & accept_page);
        page = if accept_page && !offset {
            (mp >> 64) as u64
        } else {
            page
        };
        buf[n & 63] = start + page * PAGE + ((mw >> 64) as u64) * 8;
        let done = accept & offset;
        n += done as usize;
        left -= done as u64;
        offset ^= accept;
        if n == buf.len() {
            emit(&buf);
            n = 0;
        }
    }
    emit(&buf[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_same_addresses_and_generator_state_as_gen_range() {
        for pages in [1u64, 3, 512, 1000, 1024, 4097, 1 << 20, (1 << 40) + 5] {
            for seed in 0..4u64 {
                let mut a = ChaCha8Rng::seed_from_u64(seed);
                let mut b = a.clone();
                let start = 0x7f00_0000_0000;
                let want: Vec<u64> = (0..3000)
                    .map(|_| {
                        let page = a.gen_range(0..pages);
                        start + page * PAGE + a.gen_range(0..PAGE / 8) * 8
                    })
                    .collect();
                let mut got = Vec::new();
                uniform_addrs(&mut b, start, pages, 3000, |s| got.extend_from_slice(s));
                assert_eq!(got, want, "pages {pages}, seed {seed}");
                assert_eq!(a.next_u64(), b.next_u64(), "generator state after");
            }
        }
    }
}
