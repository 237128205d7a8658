//! Tests of the XSBench model: footprint, material tables, init order, lookup shape.

use std::collections::HashSet;

use tierlab::workload::{Mark, Op, OpBuf, ThreadStream};

use super::layout::NGP_BYTES;
use super::stream::CHUNK;
use super::*;

const MIB: f64 = 1024.0 * 1024.0;

fn drain(s: &mut dyn ThreadStream) -> Vec<Op> {
    let mut all = Vec::new();
    let mut buf = OpBuf::new();
    loop {
        buf.clear();
        s.refill(&mut buf);
        if buf.is_empty() {
            return all;
        }
        all.extend(buf.iter());
    }
}

/// Splits a post-init op stream into lookups (IFetch .. Mark(Work(1))).
fn lookups(ops: &[Op]) -> Vec<&[Op]> {
    let mut v = Vec::new();
    let mut start = None;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Mark(Mark::RoiBegin) => start = Some(i + 1),
            Op::Mark(Mark::Work(1)) => {
                v.push(&ops[start.unwrap()..=i]);
                start = Some(i + 1);
            }
            _ => {}
        }
    }
    v
}

fn cfg(size: Size, threads: u32, particles: u64) -> XsbenchConfig {
    XsbenchConfig {
        size,
        threads,
        particles,
        ..Default::default()
    }
}

#[test]
fn footprint() {
    let large = estimate_mem_bytes(&cfg(Size::Large, 1, 1)) as f64 / MIB;
    let small = estimate_mem_bytes(&cfg(Size::Small, 1, 1)) as f64 / MIB;
    assert!((large - 5648.2).abs() < 0.05, "large {large}");
    assert!((small - 240.4).abs() < 0.05, "small {small}");
    let l = XsbenchLayout::new(&cfg(Size::Large, 1, 1));
    assert!(((l.nuclide_grid.len as f64 / MIB) - 183.7).abs() < 0.05);
    assert!(((l.energy.len as f64 / MIB) - 30.6).abs() < 0.05);
    assert!(((l.index_grid.len as f64 / MIB) - 5433.9).abs() < 0.05);
    let pages = l.nuclide_grid.pages() + l.energy.pages() + l.index_grid.pages();
    assert!((1_445_934..1_445_940).contains(&pages), "{pages}");
    // Layout: non-overlapping, page aligned, below 2^44.
    let regs = [l.text, l.heap, l.index_grid, l.energy, l.nuclide_grid];
    for w in regs.windows(2) {
        assert!(w[0].end() <= w[1].start);
    }
    for r in regs {
        assert_eq!(r.start % PAGE, 0);
        assert_eq!(r.len % PAGE, 0);
        assert!(r.end() <= 1 << 44);
    }
    let w = build(&cfg(Size::Large, 16, 50_000));
    let info: std::collections::HashMap<_, _> = w.info.iter().cloned().collect();
    assert_eq!(info["Est. Memory Usage (MB)"], "5,649");
    assert_eq!(info["Unionized Energy Gridpoints"], "4,012,565");
    assert_eq!(info["Total XS Lookups"], "1,700,000");
}

#[test]
fn material_tables() {
    for (n_iso, fuel) in [(68u64, 34usize), (355, 321)] {
        let nn = num_nucs(n_iso);
        let mats = material_nuclides(n_iso);
        assert_eq!(mats[0].len(), fuel);
        for m in 0..12 {
            assert_eq!(mats[m].len(), nn[m] as usize);
            assert!(mats[m].iter().all(|&x| (x as u64) < n_iso));
            let set: HashSet<_> = mats[m].iter().collect();
            assert_eq!(set.len(), mats[m].len(), "duplicate nuclide in mat {m}");
        }
    }
    let p = pick_mat_probabilities();
    assert!((p[0] - 0.139).abs() < 1e-9);
    assert!((p[2] - 0.275).abs() < 1e-9);
    assert!((p[11] - 0.013).abs() < 1e-9);
    let e: f64 = (0..12).map(|m| p[m] * num_nucs(355)[m] as f64).sum();
    assert!((e - 55.4).abs() < 0.05, "{e}");
}

#[test]
fn init_order() {
    for c in [
        cfg(Size::Small, 2, 10),
        XsbenchConfig {
            scale: 0.2,
            ..cfg(Size::Large, 2, 10)
        },
    ] {
        let l = XsbenchLayout::new(&c);
        let mut w = build(&c);
        let ops = drain(w.threads[0].stream.as_mut());
        let barrier = ops.iter().position(|o| *o == Op::Barrier).unwrap();
        assert!(matches!(ops[0], Op::Mmap { addr, .. } if addr == TEXT_BASE));
        assert_eq!(ops[1], Op::IFetch(TEXT_BASE));
        let arrays = [l.nuclide_grid, l.energy, l.index_grid];
        let mut seen = HashSet::new();
        let mut order = Vec::new();
        for op in &ops[..barrier] {
            if let Op::Store(a) | Op::Load(a) = *op {
                if let Some(k) = arrays.iter().position(|r| r.contains(a)) {
                    assert!(seen.insert(a / PAGE), "page touched twice");
                    order.push((k, a / PAGE));
                }
            }
        }
        let total: u64 = arrays.iter().map(|r| r.pages()).sum();
        assert_eq!(order.len() as u64, total);
        // ng pages ascending, then energy, then index_grid.
        for w in order.windows(2) {
            assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[1].1 == w[0].1 + 1));
        }
        assert_eq!(order[0], (0, l.nuclide_grid.start / PAGE));
        // Each array is mmapped before its first store; small arrays after index_grid.
        let mmap_pos = |r: Region| {
            ops.iter()
                .position(|o| matches!(o, Op::Mmap { addr, .. } if *addr == r.start))
                .unwrap()
        };
        let first_store = |r: Region| {
            ops.iter()
                .position(|o| matches!(o, Op::Store(a) if r.contains(*a)))
                .unwrap()
        };
        for r in [l.nuclide_grid, l.energy, l.index_grid, l.heap] {
            assert!(mmap_pos(r) < first_store(r));
        }
        assert!(first_store(l.heap) > first_store(l.index_grid));
        // Other threads start with the barrier.
        let o1 = drain(w.threads[1].stream.as_mut());
        assert_eq!(o1[0], Op::Barrier);
        assert_eq!(o1[1], Op::Mark(Mark::RoiBegin));
        assert_eq!(*o1.last().unwrap(), Op::Exit);
    }
}

#[test]
fn material_mix() {
    let c = XsbenchConfig {
        scale: 0.01,
        lookups_per_particle: 1,
        ..cfg(Size::Small, 2, 400_000)
    };
    let l = XsbenchLayout::new(&c);
    let mut w = build(&c);
    // Thread 1 has 200k lookups and no init.
    let ops = drain(w.threads[1].stream.as_mut());
    let mut counts = [0u64; 12];
    let mut n = 0u64;
    for lk in lookups(&ops) {
        let mut mat = None;
        let mut nucs = 0;
        for op in lk {
            if let Op::Load(a) = *op {
                if (l.num_nucs_addr..l.num_nucs_addr + 48).contains(&a) {
                    mat = Some(((a - l.num_nucs_addr) / 4) as usize);
                }
                if l.nuclide_grid.contains(a) {
                    nucs += 1;
                }
            }
        }
        let m = mat.unwrap();
        assert_eq!(nucs, 2 * num_nucs(68)[m]);
        counts[m] += 1;
        n += 1;
    }
    assert_eq!(n, 200_000);
    let p = pick_mat_probabilities();
    for m in 0..12 {
        let f = counts[m] as f64 / n as f64;
        let sd = (p[m] * (1.0 - p[m]) / n as f64).sqrt();
        assert!((f - p[m]).abs() < 5.0 * sd, "mat {m}: {f} vs {}", p[m]);
    }
    let fuel = counts[0] as f64 / n as f64;
    assert!((fuel - 0.139).abs() < 0.004, "{fuel}");
}

#[test]
fn pages_and_probes_per_lookup_large() {
    let c = cfg(Size::Large, 2, 2000);
    let l = XsbenchLayout::new(&c);
    let mut w = build(&c);
    let ops = drain(w.threads[1].stream.as_mut());
    let lks = lookups(&ops);
    assert_eq!(lks.len(), 1000 * 34);
    let n = l.n_unionized - 1;
    let (lo_probes, hi_probes) = ((n as f64).log2().floor(), (n as f64).log2().ceil());
    assert_eq!((lo_probes, hi_probes), (21.0, 22.0));
    let (mut ng, mut ig, mut eg, mut probes) = (0usize, 0usize, 0usize, 0usize);
    let mut nucs = 0usize;
    let mut pages = [HashSet::new(), HashSet::new(), HashSet::new()];
    for lk in &lks {
        for s in pages.iter_mut() {
            s.clear();
        }
        let mut p = 0;
        for op in *lk {
            if let Op::Load(a) = *op {
                if l.nuclide_grid.contains(a) {
                    pages[0].insert(a / PAGE);
                    nucs += 1;
                } else if l.index_grid.contains(a) {
                    pages[1].insert(a / PAGE);
                } else if l.energy.contains(a) {
                    pages[2].insert(a / PAGE);
                    p += 1;
                }
            }
        }
        assert!(p as f64 >= lo_probes && p as f64 <= hi_probes, "{p} probes");
        assert!((1..=2).contains(&pages[1].len()));
        probes += p;
        ng += pages[0].len();
        ig += pages[1].len();
        eg += pages[2].len();
    }
    let k = lks.len() as f64;
    let (ng, ig, eg, probes) = (
        ng as f64 / k,
        ig as f64 / k,
        eg as f64 / k,
        probes as f64 / k,
    );
    let nucs = nucs as f64 / 2.0 / k;
    eprintln!(
        "per lookup: nuclides {nucs:.2}; pages ng {ng:.2} ig {ig:.2} egrid {eg:.2}; probes {probes:.2}"
    );
    // 55.4 nuclides expected; sd of the mean over 34k lookups is ~0.6.
    assert!((53.0..58.0).contains(&nucs), "nuclides {nucs}");
    // One page per nuclide, two when low/high straddle a page (~2.3%).
    assert!(
        (1.0..1.05).contains(&(ng / nucs)),
        "ng pages per nuclide {}",
        ng / nucs
    );
    assert!((53.0..60.0).contains(&ng), "nuclide grid {ng}");
    assert!((1.0..2.0).contains(&ig), "index grid {ig}");
    assert!((10.0..15.0).contains(&eg), "energy {eg}");
    assert!((21.5..=22.0).contains(&probes), "probes {probes}");
}

/// The index-grid row, the nuclide-grid gridpoints and the binary search agree on one energy,
/// and energies are uniform.
#[test]
fn lookup_positions_consistent() {
    let c = XsbenchConfig {
        scale: 0.1,
        ..cfg(Size::Large, 2, 400)
    };
    let l = XsbenchLayout::new(&c);
    let (n_u, ng, n_iso) = (l.n_unionized, l.n_gridpoints, l.n_isotopes);
    let mut w = build(&c);
    let ops = drain(w.threads[1].stream.as_mut());
    let lks = lookups(&ops);
    let mut sum_e = 0.0;
    for lk in &lks {
        let mut last_probe = 0;
        let mut row = None;
        let mut lows = Vec::new();
        for op in *lk {
            if let Op::Load(a) = *op {
                if l.energy.contains(a) {
                    last_probe = (a - l.energy_addr) / 8;
                } else if l.index_grid.contains(a) {
                    let off = a - l.index_grid_addr;
                    let r = off / (n_iso * 4);
                    assert!(row.is_none_or(|x| x == r), "one row per lookup");
                    row = Some(r);
                } else if l.nuclide_grid.contains(a) {
                    let k = (a - l.nuclide_grid_addr) / NGP_BYTES;
                    if (a - l.nuclide_grid_addr).is_multiple_of(NGP_BYTES) {
                        lows.push(k % ng);
                    } else {
                        // high's last field: same nuclide, gridpoint low+1.
                        assert_eq!(k % ng, lows.last().unwrap() + 1);
                    }
                }
            }
        }
        let idx = row.unwrap();
        // grid_search returns the lower limit; the last probe is idx or idx+1.
        assert!(last_probe == idx || last_probe == idx + 1);
        let e = idx as f64 / n_u as f64;
        sum_e += e;
        let expect = (e * ng as f64).min((ng - 2) as f64);
        for &low in &lows {
            assert!(low <= ng - 2);
            assert!((low as f64 - expect).abs() <= 1.0, "low {low} vs {expect}");
        }
    }
    let mean = sum_e / lks.len() as f64;
    // Uniform energies: mean 0.5, sd of the mean ~0.29/sqrt(6800) = 0.0035.
    assert!((mean - 0.5).abs() < 0.02, "mean energy {mean}");
}

#[test]
fn determinism() {
    let c = XsbenchConfig {
        scale: 0.01,
        ..cfg(Size::Large, 3, 20)
    };
    let run = |c: &XsbenchConfig| -> Vec<Vec<Op>> {
        let mut w = build(c);
        w.threads
            .iter_mut()
            .map(|t| drain(t.stream.as_mut()))
            .collect()
    };
    let a = run(&c);
    assert_eq!(a, run(&c));
    let b = run(&XsbenchConfig { seed: 43, ..c });
    assert_ne!(a, b);
    // Threads differ from each other too.
    assert_ne!(a[1], a[2]);
}

#[test]
fn thread_split() {
    let c = XsbenchConfig {
        scale: 0.01,
        lookups_per_particle: 5,
        ..cfg(Size::Small, 7, 1003)
    };
    let mut w = build(&c);
    let mut total = 0u64;
    for (t, th) in w.threads.iter_mut().enumerate() {
        let ops = drain(th.stream.as_mut());
        let work: u64 = ops
            .iter()
            .map(|o| match o {
                Op::Mark(Mark::Work(k)) => *k as u64,
                _ => 0,
            })
            .sum();
        let t = t as u64;
        assert_eq!(work, ((t + 1) * 1003 / 7 - t * 1003 / 7) * 5);
        total += work;
    }
    assert_eq!(total, 1003 * 5);
}

#[test]
fn refill_is_bounded() {
    let c = cfg(Size::Large, 2, 10);
    let mut w = build(&c);
    let mut buf = OpBuf::new();
    for _ in 0..200 {
        buf.clear();
        w.threads[0].stream.refill(&mut buf);
        assert!(!buf.is_empty() && buf.len() < CHUNK + 2048, "{}", buf.len());
    }
}
