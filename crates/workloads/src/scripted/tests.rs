//! Tests of the scripted workload: exact op sequences, distributions and keyed errors.

use tierlab::config::ConfigError;
use tierlab::workload::{
    advice, prot, Backing, Mark, Op, OpBuf, Placement, ThreadStream, Workload,
};

use super::process_image::REGIONS_END;
use super::regions::{ALIGN, BASE};
use super::stream::CHUNK;
use super::PAGE;
use super::{build, SAMPLER_PHASE};

const HDR: &str = "[workload]\ntype = \"scripted\"\n";

fn try_build(src: &str, seed: u64) -> Result<Workload, ConfigError> {
    let doc: toml::Table = toml::from_str(&format!("{HDR}{src}")).expect("test TOML parses");
    let table = doc["workload"].as_table().unwrap().clone();
    build(&table, "t.toml", seed, 2, 4, 2.2)
}

fn wl(src: &str) -> Workload {
    try_build(src, 7).unwrap_or_else(|e| panic!("{e}"))
}

fn drain(s: &mut dyn ThreadStream) -> Vec<Op> {
    let mut out = OpBuf::new();
    loop {
        let before = out.len();
        s.refill(&mut out);
        if out.len() == before {
            return out.to_vec();
        }
        assert!(out.len() - before <= CHUNK + 8, "refill must stay chunked");
        assert!(out.len() < 50_000_000, "runaway stream");
    }
}

/// Worker `t`'s ops (the simulator's thread `t + 1`: thread 0 is the main thread), without
/// the two stores to its stack it starts with.
fn ops(w: &mut Workload, t: usize) -> Vec<Op> {
    let mut o = drain(w.threads[t + 1].stream.as_mut());
    assert_eq!(o[0], Op::Barrier);
    for x in o.drain(1..3) {
        assert!(
            matches!(x, Op::Store(a) if a >= REGIONS_END),
            "a worker first touches its stack, above the regions: {x:?}"
        );
    }
    o
}

/// The main thread's ops: the regions' mmaps, then it waits for the workers.
fn main_ops(w: &mut Workload) -> Vec<Op> {
    drain(w.threads[0].stream.as_mut())
}

fn accesses(ops: &[Op]) -> Vec<Op> {
    ops.iter()
        .copied()
        .filter(|o| matches!(o, Op::Load(_) | Op::Store(_)))
        .collect()
}

fn addr(o: &Op) -> u64 {
    match o {
        Op::Load(a) | Op::Store(a) => *a,
        _ => panic!("not an access: {o:?}"),
    }
}

const BUF8: &str = "[[workload.regions]]\nname = \"buf\"\npages = 8\n";

#[test]
fn touch_sequential_exact_sequence() {
    let mut w = wl(&format!(
        "{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n"
    ));
    assert_eq!(w.phases, vec!["touch buf".to_string()]);
    assert_eq!(w.regions.len(), 1);
    assert_eq!(w.regions[0].start, BASE);
    assert_eq!(w.regions[0].len, 8 * PAGE);
    let m = main_ops(&mut w);
    let region = Op::Mmap {
        addr: BASE,
        len: 8 * PAGE,
        prot: prot::READ | prot::WRITE,
        backing: Backing::Anon,
    };
    assert_eq!(m.iter().filter(|o| **o == region).count(), 1);
    assert_eq!(&m[m.len() - 3..], &[Op::Barrier, Op::Join, Op::Exit]);
    // Everything else the main thread maps or touches is its process image, off the region.
    for o in &m {
        let a = match o {
            Op::Mmap { addr, .. } | Op::Store(addr) => *addr,
            _ => continue,
        };
        assert!(*o == region || !(BASE..REGIONS_END).contains(&a), "{o:?}");
    }
    let o = ops(&mut w, 0);
    let mut want = vec![Op::Barrier, Op::Mark(Mark::Phase(0))];
    want.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
    want.extend([Op::Mark(Mark::Work(8)), Op::Barrier, Op::Exit]);
    assert_eq!(o, want);
}

#[test]
fn touch_reverse_and_random_permutation() {
    let mut w = wl(&format!(
        "{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\norder = \"reverse\"\n"
    ));
    let a = accesses(&ops(&mut w, 0));
    let want: Vec<Op> = (0..8).rev().map(|i| Op::Load(BASE + i * PAGE)).collect();
    assert_eq!(a, want);

    let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 64\n\
         [[workload.phases]]\nkind = \"touch\"\nregion = \"b\"\norder = \"random\"\n");
    let a: Vec<u64> = accesses(&ops(&mut w, 0)).iter().map(addr).collect();
    assert_eq!(a.len(), 64);
    let seq: Vec<u64> = (0..64).map(|i| BASE + i * PAGE).collect();
    assert_ne!(a, seq, "a random order should not be sequential");
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, seq, "every page exactly once");
}

#[test]
fn stride_and_subrange() {
    let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 2\n\
         [[workload.phases]]\nkind = \"stride\"\nregion = \"b\"\nstride_bytes = 1024\n\
         [[workload.phases]]\nkind = \"stride\"\nregion = \"b\"\nstride_bytes = 3000\noffset_pages = 1\npages = 1\nwrite = true\n");
    assert_eq!(w.phases, vec!["stride b", "stride b #2"]);
    let o = ops(&mut w, 0);
    let a = accesses(&o);
    let mut want: Vec<Op> = (0..8).map(|i| Op::Load(BASE + i * 1024)).collect();
    want.extend([Op::Store(BASE + PAGE), Op::Store(BASE + PAGE + 3000)]);
    assert_eq!(a, want);
    assert!(o.contains(&Op::Mark(Mark::Work(8))));
    assert!(o.contains(&Op::Mark(Mark::Work(2))));
}

#[test]
fn single_op_phases() {
    let mut w = wl(&format!(
        "{BUF8}[[workload.regions]]\nname = \"f\"\nkind = \"file\"\nsize_kib = 16\nprot = \"r\"\n\
         [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
         [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"cold\"\noffset_pages = 2\npages = 3\n\
         [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"dontneed\"\n\
         [[workload.phases]]\nkind = \"move_pages\"\nregion = \"buf\"\nnode = 1\n\
         [[workload.phases]]\nkind = \"mprotect\"\nregion = \"buf\"\nprot = \"r\"\n\
         [[workload.phases]]\nkind = \"sleep\"\nms = 10\n\
         [[workload.phases]]\nkind = \"barrier\"\n\
         [[workload.phases]]\nkind = \"munmap\"\nregion = \"f\"\n\
         [[workload.phases]]\nkind = \"mmap\"\nregion = \"f\"\noffset_pages = 1\n"
    ));
    // The region's file, then the program's (its text and data mappings).
    assert_eq!(w.files.len(), 2);
    assert_eq!(w.files[0].pages, 4);
    assert_eq!(w.files[1].name, "program");
    let f = w.regions[1].start;
    assert!(f >= BASE + 8 * PAGE + ALIGN);
    assert_eq!(f % ALIGN, 0);
    let m = main_ops(&mut w);
    let first_region = m
        .iter()
        .position(|o| matches!(o, Op::Mmap { addr, .. } if *addr == BASE))
        .expect("the region is mapped");
    assert_eq!(
        m[first_region..first_region + 2],
        [
            Op::Mmap {
                addr: BASE,
                len: 8 * PAGE,
                prot: 3,
                backing: Backing::Anon,
            },
            Op::Mmap {
                addr: f,
                len: 4 * PAGE,
                prot: prot::READ,
                backing: Backing::File { file: 0, pgoff: 0 },
            },
        ]
    );
    let o = ops(&mut w, 0);
    let want = vec![
        Op::Barrier,
        Op::Mark(Mark::Phase(0)),
        Op::Madvise {
            addr: BASE,
            len: 8 * PAGE,
            advice: advice::MADV_PAGEOUT,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(1)),
        Op::Madvise {
            addr: BASE + 2 * PAGE,
            len: 3 * PAGE,
            advice: advice::MADV_COLD,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(2)),
        Op::Madvise {
            addr: BASE,
            len: 8 * PAGE,
            advice: advice::MADV_DONTNEED,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(3)),
        Op::MovePages {
            addr: BASE,
            len: 8 * PAGE,
            node: 1,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(4)),
        Op::Mprotect {
            addr: BASE,
            len: 8 * PAGE,
            prot: prot::READ,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(5)),
        Op::Sleep(10_000_000),
        Op::Barrier,
        Op::Mark(Mark::Phase(6)),
        Op::Barrier,
        Op::Mark(Mark::Phase(7)),
        Op::Munmap {
            addr: f,
            len: 4 * PAGE,
        },
        Op::Barrier,
        Op::Mark(Mark::Phase(8)),
        Op::Mmap {
            addr: f + PAGE,
            len: 3 * PAGE,
            prot: prot::READ,
            backing: Backing::File { file: 0, pgoff: 1 },
        },
        Op::Barrier,
        Op::Exit,
    ];
    assert_eq!(o, want);
}

#[test]
fn participants_and_barriers() {
    let mut w = wl(&format!(
        "threads = 3\nplacement = \"pinned\"\n{BUF8}\
         [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 5\n\
         [[workload.phases]]\nkind = \"sleep\"\nms = 1\nthreads = [1, 2]\n"
    ));
    assert_eq!(w.threads.len(), 4, "main + 3 workers");
    assert_eq!(w.threads[0].placement, Placement::Spread);
    assert_eq!(w.threads[3].placement, Placement::Pinned(2));
    let per: Vec<Vec<Op>> = (0..3).map(|t| ops(&mut w, t)).collect();
    for (t, o) in per.iter().enumerate() {
        let barriers = o.iter().filter(|x| **x == Op::Barrier).count();
        assert_eq!(barriers, 4, "thread {t}: prologue + one per phase");
        let marks: Vec<u32> = o
            .iter()
            .filter_map(|x| match x {
                Op::Mark(Mark::Phase(p)) => Some(*p),
                _ => None,
            })
            .collect();
        let want: Vec<u32> = match t {
            0 => vec![0, 1],
            _ => vec![1, 2],
        };
        assert_eq!(marks, want, "thread {t}");
        assert_eq!(accesses(o).len(), if t == 0 { 13 } else { 5 });
        assert!(!o.iter().any(|x| matches!(x, Op::Mmap { .. } | Op::Join)));
        assert_eq!(o.last(), Some(&Op::Exit));
    }
}

#[test]
fn loops_repeat_phase_groups() {
    let mut w = wl("[[workload.regions]]\nname = \"buf\"\npages = 4\n\
         [[workload.phases]]\nname = \"touch\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
         [[workload.phases]]\nname = \"pageout\"\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
         [[workload.phases]]\nname = \"end\"\nkind = \"barrier\"\n\
         [[workload.loop]]\ntimes = 3\nphases = [\"touch\", \"pageout\"]\n");
    assert_eq!(w.phases, vec!["touch", "pageout", "end"]);
    let o = ops(&mut w, 0);
    let marks: Vec<u32> = o
        .iter()
        .filter_map(|x| match x {
            Op::Mark(Mark::Phase(p)) => Some(*p),
            _ => None,
        })
        .collect();
    assert_eq!(marks, vec![0, 1, 0, 1, 0, 1, 2]);
    let stores = o.iter().filter(|x| matches!(x, Op::Store(_))).count();
    let madv = o
        .iter()
        .filter(|x| {
            matches!(
                x,
                Op::Madvise {
                    advice: advice::MADV_PAGEOUT,
                    ..
                }
            )
        })
        .count();
    assert_eq!((stores, madv), (12, 3));
    // Whole-program repetition.
    let mut w = wl(&format!(
        "loops = 2\n{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\n"
    ));
    assert_eq!(accesses(&ops(&mut w, 0)).len(), 16);
}

#[test]
fn long_loops_are_lazy() {
    let mut w = wl("[[workload.regions]]\nname = \"buf\"\nsize_mib = 1\n\
         [[workload.phases]]\nname = \"t\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
         [[workload.phases]]\nname = \"p\"\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
         [[workload.loop]]\ntimes = 10000\nphases = [\"t\", \"p\"]\n");
    let s = w.threads[1].stream.as_mut();
    let mut out = OpBuf::new();
    let mut total = 0usize;
    let mut calls = 0;
    loop {
        out.clear();
        s.refill(&mut out);
        if out.is_empty() {
            break;
        }
        assert!(out.len() <= CHUNK + 8);
        total += out.len();
        calls += 1;
    }
    // 10 000 × (mark + 256 stores + work + barrier + mark + madvise + barrier) + barrier,
    // two stack stores and exit.
    assert_eq!(total, 10_000 * 262 + 4);
    assert!(calls > 2000);
}

#[test]
fn region_node_binding_moves_after_touch() {
    let mut w = wl(
        "[[workload.regions]]\nname = \"buf\"\npages = 4\nnode = 1\n\
         [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\noffset_pages = 1\n",
    );
    let o = ops(&mut w, 0);
    let n = o.len();
    assert_eq!(
        &o[n - 4..],
        &[
            Op::Mark(Mark::Work(3)),
            Op::MovePages {
                addr: BASE,
                len: 4 * PAGE,
                node: 1
            },
            Op::Barrier,
            Op::Exit
        ]
    );
}

fn page_counts(w: &mut Workload, pages: usize) -> Vec<u64> {
    let mut c = vec![0u64; pages];
    for a in accesses(&ops(w, 0)) {
        let off = addr(&a) - BASE;
        assert_eq!(off % 8, 0);
        c[(off / PAGE) as usize] += 1;
    }
    c
}

#[test]
fn uniform_distribution() {
    let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 160000\n");
    let c = page_counts(&mut w, 16);
    assert_eq!(c.iter().sum::<u64>(), 160_000);
    let mut chi2 = 0.0;
    for &x in &c {
        assert!((9500..=10500).contains(&x), "{c:?}");
        chi2 += (x as f64 - 10_000.0).powi(2) / 10_000.0;
    }
    // 15 degrees of freedom: p = 0.001 at 37.7.
    assert!(chi2 < 37.7, "chi2 {chi2}");
}

#[test]
fn zipf_distribution() {
    let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 160000\n\
         distribution = \"zipf\"\nzipf_s = 1.0\n");
    let c = page_counts(&mut w, 16);
    let h: f64 = (1..=16).map(|k| 1.0 / k as f64).sum();
    let f0 = c[0] as f64 / 160_000.0;
    assert!(
        (f0 * h - 1.0).abs() < 0.05,
        "page 0 freq {f0}, expected {}",
        1.0 / h
    );
    for (k, &n) in c.iter().enumerate() {
        let want = 160_000.0 / ((k + 1) as f64 * h);
        assert!(
            (n as f64 / want - 1.0).abs() < 0.1,
            "page {k}: {n} vs {want}",
        );
    }
    // Monotone on average: later blocks of pages are colder.
    assert!(c[..4].iter().sum::<u64>() > c[4..8].iter().sum::<u64>());
    assert!(c[4..8].iter().sum::<u64>() > c[8..16].iter().sum::<u64>() / 2);
    // hot = "last" mirrors it.
    let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 20000\n\
         distribution = \"zipf\"\nzipf_s = 1.0\nhot = \"last\"\n");
    let c = page_counts(&mut w, 16);
    assert!(c[15] > c[0] * 8 && c[15] > c[14], "{c:?}");
}

#[test]
fn write_fraction_and_write_flag() {
    let mut w = wl(&format!(
        "{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 20000\nwrite_fraction = 0.2\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 100\nwrite = true\n"
    ));
    let a = accesses(&ops(&mut w, 0));
    let stores = a[..20000]
        .iter()
        .filter(|x| matches!(x, Op::Store(_)))
        .count();
    assert!((3600..=4400).contains(&stores), "{stores}");
    assert!(a[20000..].iter().all(|x| matches!(x, Op::Store(_))));
}

#[test]
fn rate_and_gap_control() {
    let mut w = wl(&format!(
        "{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 5\nrate_per_s = 1000000\n\
         [[workload.phases]]\nkind = \"stride\"\nregion = \"buf\"\nstride_bytes = 8192\ngap_cycles = 100\n\
         [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\nduration_ms = 2\nrate_per_s = 3000\n"
    ));
    let o = ops(&mut w, 0);
    let p0 = o
        .iter()
        .position(|x| *x == Op::Mark(Mark::Phase(0)))
        .unwrap();
    // 1 µs slots are paced in one batch of 50 (50 µs), as the C program sleeps.
    assert_eq!(o[p0 + 1], Op::Pace(50_000));
    for k in 0..5 {
        assert!(matches!(o[p0 + 2 + k], Op::Load(_)));
    }
    let p1 = o
        .iter()
        .position(|x| *x == Op::Mark(Mark::Phase(1)))
        .unwrap();
    let want = [
        Op::Load(BASE),
        Op::Compute(100),
        Op::Load(BASE + 2 * PAGE),
        Op::Compute(100),
        Op::Load(BASE + 4 * PAGE),
        Op::Compute(100),
        Op::Load(BASE + 6 * PAGE),
        Op::Mark(Mark::Work(4)),
    ];
    assert_eq!(&o[p1 + 1..p1 + 9], &want);
    let p2 = o
        .iter()
        .position(|x| *x == Op::Mark(Mark::Phase(2)))
        .unwrap();
    let paces = o[p2..].iter().filter(|x| **x == Op::Pace(333_333)).count();
    assert_eq!(paces, 6);
    assert_eq!(accesses(&o[p2..]).len(), 6);
}

#[test]
fn gap_cycles_may_differ_per_thread() {
    let mut w = wl(&format!(
        "threads = 2\n{BUF8}[[workload.phases]]\nkind = \"stride\"\nregion = \"buf\"\n\
         stride_bytes = 16384\ngap_cycles = [100, 300]\n"
    ));
    for (t, gap) in [(0, 100), (1, 300)] {
        let computes: Vec<Op> = ops(&mut w, t)
            .into_iter()
            .filter(|o| matches!(o, Op::Compute(_)))
            .collect();
        assert_eq!(computes, vec![Op::Compute(gap); 1], "thread {t}");
    }
}

#[test]
fn pace_delay_opens_each_threads_schedule_at_its_own_origin() {
    let mut w = wl(&format!(
        "threads = 2\n{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 3\n\
         rate_per_s = 1000\npace_delay_ns = [0, 8000]\n"
    ));
    for (t, delay) in [(0, 0), (1, 8000)] {
        let o = ops(&mut w, t);
        let p = o
            .iter()
            .position(|x| *x == Op::Mark(Mark::Phase(0)))
            .unwrap();
        // Before the first Pace only: the schedule runs on from there.
        assert_eq!(
            &o[p + 1..p + 3],
            &[Op::PaceOrigin(delay), Op::Pace(1_000_000)]
        );
        let origins = o.iter().filter(|x| matches!(x, Op::PaceOrigin(_))).count();
        assert_eq!(origins, 1, "thread {t}");
    }
}

#[test]
fn deterministic_per_seed() {
    let src = format!(
        "threads = 2\n{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 3000\n\
         distribution = \"zipf\"\nwrite_fraction = 0.5\n\
         [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\norder = \"random\"\n"
    );
    let run = |seed| {
        let mut w = try_build(&src, seed).unwrap();
        (ops(&mut w, 0), ops(&mut w, 1))
    };
    let a = run(1);
    assert_eq!(a, run(1));
    assert_ne!(a.0, a.1, "threads draw different streams");
    assert_ne!(a, run(2));
}

#[test]
fn errors_name_the_key() {
    let r = "[[workload.regions]]\nname = \"buf\"\npages = 8\n";
    let ph = |body: &str| format!("{r}[[workload.phases]]\n{body}\n");
    let cases: Vec<(String, &str)> = vec![
        (ph("kind = \"touch\"\nregion = \"buf\"\ncnt = 3"), "`workload.phases[0].cnt`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\ngap_cycles = [1, 2]"), "`workload.phases[0].gap_cycles`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\npace_delay_ns = 5"), "`workload.phases[0].pace_delay_ns`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = 10\npace_delay_ns = [1, 2]"), "`workload.phases[0].pace_delay_ns`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\ngap_cycles = -1"), "`workload.phases[0].gap_cycles`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\ngap_cycles = \"x\""), "`workload.phases[0].gap_cycles`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = \"x\""), "`workload.phases[0].count`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\npages = 9"), "`workload.phases[0].pages`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\noffset_pages = 4\npages = 5"), "`workload.phases[0].pages`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\noffset_pages = 8"), "`workload.phases[0].offset_pages`"),
        (ph("kind = \"touch\"\nregion = \"nope\""), "`workload.phases[0].region`"),
        (ph("kind = \"touch\""), "`workload.phases[0].region`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = 0"), "`workload.phases[0].rate_per_s`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = -5"), "`workload.phases[0].rate_per_s`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = 2e9"), "`workload.phases[0].rate_per_s`"),
        (format!("{r}node = 2\n"), "`workload.regions[0].node`"),
        (ph("kind = \"move_pages\"\nregion = \"buf\"\nnode = 5"), "`workload.phases[0].node`"),
        (ph("kind = \"move_pages\"\nregion = \"buf\""), "`workload.phases[0].node`"),
        (ph("name = \"a\"\nkind = \"barrier\"") + "[[workload.loop]]\ntimes = 2\nphases = [\"b\"]\n", "`workload.loop[0].phases[0]`"),
        (ph("name = \"a\"\nkind = \"barrier\"") + "[[workload.loop]]\ntimes = 0\nphases = [\"a\"]\n", "`workload.loop[0].times`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\nthreads = [1]"), "`workload.phases[0].threads[0]`"),
        (format!("threads = 5\nplacement = \"pinned\"\n{r}"), "`workload.placement`"),
        (format!("threads = 2\nplacement = [0, 4]\n{r}"), "`workload.placement[1]`"),
        (format!("placement = \"everywhere\"\n{r}"), "`workload.placement`"),
        ("[[workload.regions]]\nname = \"b\"\npages = 0\n".to_string(), "`workload.regions[0].pages`"),
        ("[[workload.regions]]\nname = \"b\"\nsize_mib = 0\n".to_string(), "`workload.regions[0].size_mib`"),
        ("[[workload.regions]]\nname = \"b\"\n".to_string(), "`workload.regions[0]`"),
        ("[[workload.regions]]\nname = \"b\"\npages = 1\nsize_kib = 4\n".to_string(), "`workload.regions[0]`"),
        ("[[workload.regions]]\nname = \"b\"\npages = 1\nkind = \"shm\"\n".to_string(), "`workload.regions[0].kind`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\ndistribution = \"zipf\"\nzipf_s = 0"), "`workload.phases[0].zipf_s`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nduration_ms = 5\nrate_per_s = 10"), "`workload.phases[0].count`"),
        (ph("kind = \"random\"\nregion = \"buf\""), "`workload.phases[0].count`"),
        (ph("kind = \"random\"\nregion = \"buf\"\nduration_ms = 5"), "`workload.phases[0].duration_ms`"),
        (ph("kind = \"stride\"\nregion = \"buf\"\nstride_bytes = 0"), "`workload.phases[0].stride_bytes`"),
        (ph("kind = \"fly\"\nregion = \"buf\""), "`workload.phases[0].kind`"),
        (ph("kind = \"madvise\"\nregion = \"buf\"\nadvice = \"free\""), "`workload.phases[0].advice`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\norder = \"sideways\""), "`workload.phases[0].order`"),
        (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\ndistribution = \"normal\""), "`workload.phases[0].distribution`"),
        (ph("kind = \"touch\"\nregion = \"buf\"\nms = 3"), "`workload.phases[0].ms`"),
        (ph("kind = \"mprotect\"\nregion = \"buf\"\nprot = \"q\""), "`workload.phases[0].prot`"),
        (ph("name = \"x\"\nkind = \"barrier\"") + "[[workload.phases]]\nname = \"x\"\nkind = \"barrier\"\n", "`workload.phases[1].name`"),
        ("threads = 0\n".to_string(), "`workload.threads`"),
        ("processes = 2\n".to_string(), "`workload.processes`"),
    ];
    for (src, key) in cases {
        match try_build(&src, 1) {
            Ok(_) => panic!("expected an error naming {key} for:\n{src}"),
            Err(e) => {
                assert!(e.to_string().starts_with("t.toml: key `"), "{e}");
                assert!(
                    e.to_string().contains(key),
                    "error {e:?} should name {key} for:\n{src}"
                );
            }
        }
    }
}

#[test]
fn each_kind_rejects_keys_it_does_not_take_and_names_key_and_kind() {
    // (kind, the other keys it needs, a key some other kind takes)
    let cases = [
        ("touch", "region = \"buf\"", "count"),
        ("random", "region = \"buf\"\ncount = 1", "order"),
        ("stride", "region = \"buf\"", "hot"),
        ("madvise", "region = \"buf\"\nadvice = \"cold\"", "node"),
        ("move_pages", "region = \"buf\"\nnode = 1", "advice"),
        ("mprotect", "region = \"buf\"\nprot = \"r\"", "write"),
        ("mmap", "region = \"buf\"", "write"),
        ("munmap", "region = \"buf\"", "stride_bytes"),
        ("sleep", "ms = 1", "region"),
        ("barrier", "", "ms"),
        ("wait", "", "region"),
    ];
    for (kind, needs, foreign) in cases {
        let ok = format!("{BUF8}[[workload.phases]]\nkind = \"{kind}\"\n{needs}\n");
        try_build(&ok, 1).unwrap_or_else(|e| panic!("{e}"));
        let e = try_build(&format!("{ok}{foreign} = 1\n"), 1)
            .err()
            .expect("a key the kind does not take is an error");
        let key = format!("t.toml: key `workload.phases[0].{foreign}`: unknown field `{foreign}`");
        assert!(e.to_string().starts_with(&key), "{e}");
        assert!(
            e.to_string().ends_with(&format!("(kind = \"{kind}\")")),
            "{e}"
        );
    }
}

#[test]
fn watched_sub_ranges_become_timeline_regions_and_bad_ones_name_the_key() {
    let text = r#"
type = "scripted"
[[regions]]
name = "buf"
pages = 64
[[watch]]
name = "buf hot tail"
region = "buf"
offset_pages = 48
"#;
    let t: toml::Table = toml::from_str(text).unwrap();
    let w = build(&t, "t.toml", 1, 2, 1, 2.2).unwrap();
    assert_eq!(w.regions.len(), 2);
    assert_eq!(w.regions[1].name, "buf hot tail");
    assert_eq!(w.regions[1].start, w.regions[0].start + 48 * PAGE);
    assert_eq!(w.regions[1].len, 16 * PAGE);
    let bad = text.replace("offset_pages = 48", "offset_pages = 48\npages = 32");
    let t: toml::Table = toml::from_str(&bad).unwrap();
    let e = build(&t, "t.toml", 1, 2, 1, 2.2).err().unwrap();
    assert!(
        e.to_string().contains("key `workload.watch[0].pages`"),
        "{e}"
    );
    let bad = text.replace("region = \"buf\"", "region = \"nope\"");
    let t: toml::Table = toml::from_str(&bad).unwrap();
    let e = build(&t, "t.toml", 1, 2, 1, 2.2).err().unwrap();
    assert!(
        e.to_string().contains("key `workload.watch[0].region`"),
        "{e}"
    );
}

#[test]
fn scenario_files_build() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for (f, nodes) in [
        ("swap_bench.toml", 2),
        ("swap_young.toml", 2),
        ("hot_set.toml", 2),
    ] {
        let path = format!("{dir}/../scenarios/{f}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let seed = doc["scenario"]["seed"].as_integer().unwrap() as u64;
        let cpus = doc["machine"]["cpus"].as_integer().unwrap() as u32;
        let w = build(
            doc["workload"].as_table().unwrap(),
            f,
            seed,
            nodes,
            cpus,
            2.2,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!w.phases.is_empty(), "{f}");
    }
}

#[test]
fn pacing_batches_are_the_c_programs() {
    let c = include_str!("c_program/runtime.c");
    let want = format!("#define MIN_SLEEP_NS {}ULL", super::plan::PACE_BATCH_MIN_NS);
    assert!(c.contains(&want), "runtime.c lost `{want}`");
}

#[test]
fn a_sampler_is_a_process_of_its_own_that_runs_at_each_of_its_slots() {
    let src = "threads = 1\n[[workload.regions]]\nname = \"r\"\nsize_kib = 64\n\
               [[workload.phases]]\nname = \"t\"\nkind = \"touch\"\nregion = \"r\"\n\
               [workload.sampler]\ninterval_ms = 100\ncpu_us = 2000\nsamples = 3\n";
    let mut w = wl(src);
    assert_eq!(w.processes, 2);
    let sampler = w.threads.last_mut().unwrap();
    assert_eq!(sampler.process, 1);
    // No worker is pinned: the scheduler places it too.
    assert_eq!(sampler.placement, Placement::Spread);
    // 2 ms at 2.2 GHz after each 100 ms slot, all in a phase of its own, after the workers'.
    let slot = [Op::PollSlot(100_000_000), Op::Compute(4_400_000)];
    let want: Vec<Op> = std::iter::once(Op::Mark(Mark::Phase(1)))
        .chain(slot.iter().cycle().take(6).copied())
        .chain([Op::Exit])
        .collect();
    assert_eq!(drain(sampler.stream.as_mut()), want);
    assert_eq!(w.phases, ["t", SAMPLER_PHASE]);
    // Without the table, one process and no extra thread.
    let plain = wl(&src[..src.find("[workload.sampler]").unwrap()]);
    assert_eq!((plain.processes, plain.threads.len()), (1, 2));
    // With the worker pinned to CPU 0 (of 4), the first CPU it leaves.
    let pinned = wl(&src.replace("threads = 1\n", "threads = 1\nplacement = [0]\n"));
    assert_eq!(
        pinned.threads.last().unwrap().placement,
        Placement::Pinned(1)
    );
    // Its numbers are checked, with the key named.
    let e = match try_build(&src.replace("cpu_us = 2000", "cpu_us = 200000"), 7) {
        Err(e) => e,
        Ok(_) => panic!("a sampler busier than its interval was accepted"),
    };
    assert!(e.to_string().contains("workload.sampler.cpu_us"), "{e}");
    // A phase may not take the name the sampler's run time is reported under.
    let clash = src.replace("name = \"t\"", "name = \"sampler\"");
    let e = match try_build(&clash, 7) {
        Err(e) => e,
        Ok(_) => panic!("a phase named like the sampler was accepted"),
    };
    assert!(e.to_string().contains("workload.sampler"), "{e}");
}

#[test]
fn a_sampler_with_page_ns_reads_the_workloads_numa_maps_after_its_fixed_work() {
    let src = "threads = 1\n[[workload.regions]]\nname = \"r\"\nsize_kib = 64\n\
               [[workload.phases]]\nname = \"t\"\nkind = \"touch\"\nregion = \"r\"\n\
               [workload.sampler]\ninterval_ms = 100\ncpu_us = 2000\npage_ns = 120\nsamples = 2\n";
    let mut w = wl(src);
    let sampler = w.threads.last_mut().unwrap();
    // 120 ns per entry at 2.2 GHz: 264 cycles, of process 0 (the workload's).
    let read = Op::ReadNumaMaps {
        process: 0,
        cycles_per_entry: 264,
    };
    let slot = [Op::PollSlot(100_000_000), Op::Compute(4_400_000), read];
    let want: Vec<Op> = std::iter::once(Op::Mark(Mark::Phase(1)))
        .chain(slot.iter().cycle().take(6).copied())
        .chain([Op::Exit])
        .collect();
    assert_eq!(drain(sampler.stream.as_mut()), want);
    let e = match try_build(&src.replace("page_ns = 120", "page_ns = -1"), 7) {
        Err(e) => e,
        Ok(_) => panic!("a negative page_ns was accepted"),
    };
    assert!(e.to_string().contains("workload.sampler.page_ns"), "{e}");
}

/// The phases of a child: `Mark::Phase` ids in order.
fn phase_marks(ops: &[Op]) -> Vec<u32> {
    (ops.iter())
        .filter_map(|x| match x {
            Op::Mark(Mark::Phase(p)) => Some(*p),
            _ => None,
        })
        .collect()
}

/// Worker 0 fills buf, forks two children that each write its first half, and waits.
const FORK_TWO: &str = "threads = 2\n[[workload.regions]]\nname = \"buf\"\npages = 8\n\
     [[workload.phases]]\nname = \"fill\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
     [[workload.phases]]\nname = \"child writes\"\nkind = \"touch\"\nregion = \"buf\"\npages = 4\nwrite = true\n\
     [[workload.phases]]\nname = \"kids\"\nkind = \"fork\"\nchild = [\"child writes\"]\ncount = 2\n\
     [[workload.phases]]\nname = \"reap\"\nkind = \"wait\"\n";

#[test]
fn fork_phase_forks_children_that_run_their_phases_alone_then_exit() {
    let mut w = wl(FORK_TWO);
    assert_eq!(w.phases, ["fill", "child writes", "kids", "reap"]);
    let program = &w.info.iter().find(|(k, _)| k == "program").unwrap().1;
    assert_eq!(program, "fill, kids (child: child writes), reap");
    // The parent does not run the children's phase; worker 0 forks twice and waits twice.
    let o = ops(&mut w, 0);
    let mut want = vec![Op::Barrier, Op::Mark(Mark::Phase(0))];
    want.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
    want.extend([Op::Mark(Mark::Work(8)), Op::Barrier]);
    want.extend([Op::Mark(Mark::Phase(2)), Op::Fork, Op::Fork, Op::Barrier]);
    want.extend([
        Op::Mark(Mark::Phase(3)),
        Op::Wait,
        Op::Wait,
        Op::Barrier,
        Op::Exit,
    ]);
    assert_eq!(o, want);
    // Worker 1 takes part in no phase: only the barriers, and it has no child to give.
    let o1 = ops(&mut w, 1);
    assert_eq!(o1, [[Op::Barrier; 4].as_slice(), &[Op::Exit]].concat());
    assert!(w.threads[2].stream.fork_child().is_none());
    // One child per Op::Fork, in order: the phase alone (no barrier), then exit.
    let s = w.threads[1].stream.as_mut();
    for _ in 0..2 {
        let mut c = s.fork_child().expect("a child per fork");
        let mut want = vec![Op::Mark(Mark::Phase(1))];
        want.extend((0..4).map(|i| Op::Store(BASE + i * PAGE)));
        want.extend([Op::Mark(Mark::Work(4)), Op::Exit]);
        assert_eq!(drain(c.as_mut()), want);
        assert!(c.fork_child().is_none(), "a child forks nothing");
    }
    assert!(s.fork_child().is_none(), "two forks, two children");
    // Without a wait phase a worker waits for its children after its last phase.
    let mut w = wl(&FORK_TWO[..FORK_TWO
        .find("[[workload.phases]]\nname = \"reap\"")
        .unwrap()]);
    let o = ops(&mut w, 0);
    assert_eq!(
        o[o.len() - 4..],
        [Op::Barrier, Op::Wait, Op::Wait, Op::Exit]
    );
}

#[test]
fn a_child_takes_its_workers_per_thread_keys_and_a_random_stream_of_its_own() {
    let src = "threads = 2\n[[workload.regions]]\nname = \"buf\"\npages = 64\n\
         [[workload.phases]]\nname = \"r\"\nkind = \"random\"\nregion = \"buf\"\ncount = 5\ngap_cycles = [10, 20]\n\
         [[workload.phases]]\nname = \"only 1\"\nkind = \"touch\"\nregion = \"buf\"\npages = 2\nthreads = [1]\n\
         [[workload.phases]]\nname = \"f\"\nkind = \"fork\"\nchild = [\"r\", \"only 1\"]\nthreads = [0, 1]\ncount = 2\n";
    let children = |seed: u64| -> Vec<Vec<Op>> {
        let mut w = try_build(src, seed).unwrap();
        let mut all = Vec::new();
        for t in 0..2 {
            let o = ops(&mut w, t);
            assert_eq!(o.iter().filter(|x| **x == Op::Fork).count(), 2);
            // Both phases are the children's: the workers only fork.
            assert_eq!(phase_marks(&o), [2], "worker {t}");
            for _ in 0..2 {
                let mut c = w.threads[t + 1].stream.fork_child().unwrap();
                all.push(drain(c.as_mut()));
            }
        }
        all
    };
    let c = children(3);
    for (n, o) in c.iter().enumerate() {
        let t = n / 2;
        let gap = [10, 20][t];
        let computes: Vec<&Op> = o.iter().filter(|x| matches!(x, Op::Compute(_))).collect();
        assert_eq!(computes, [&Op::Compute(gap); 4], "child {n}");
        // Worker 1's children run the phase only worker 1 takes part in.
        let want_marks: &[u32] = if t == 0 { &[0] } else { &[0, 1] };
        assert_eq!(phase_marks(o), want_marks, "child {n}");
        assert_eq!(accesses(o).len(), if t == 0 { 5 } else { 7 });
        assert!(!o.contains(&Op::Barrier));
        assert_eq!(o.last(), Some(&Op::Exit));
    }
    assert_ne!(c[0], c[1], "a worker's children draw different streams");
    assert_ne!(
        accesses(&c[0])[..],
        accesses(&c[2])[..5],
        "so do different workers'"
    );
    assert_eq!(c, children(3), "same seed, same children");
    assert_ne!(c, children(4));
}

#[test]
fn many_forks_and_waits_stay_chunked_and_loops_fork_again() {
    let src = "[[workload.regions]]\nname = \"buf\"\npages = 4\n\
         [[workload.phases]]\nname = \"c\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
         [[workload.phases]]\nname = \"f\"\nkind = \"fork\"\nchild = [\"c\"]\ncount = 3000\n\
         [[workload.phases]]\nname = \"w\"\nkind = \"wait\"\n\
         [[workload.loop]]\ntimes = 2\nphases = [\"f\", \"w\"]\n";
    let mut w = wl(src);
    let o = ops(&mut w, 0);
    let count = |op: Op| o.iter().filter(|x| **x == op).count();
    assert_eq!((count(Op::Fork), count(Op::Wait)), (6000, 6000));
    assert_eq!(phase_marks(&o), [1, 2, 1, 2]);
    let s = w.threads[1].stream.as_mut();
    for _ in 0..6000 {
        let mut c = s.fork_child().unwrap();
        assert_eq!(accesses(&drain(c.as_mut())).len(), 4);
    }
    assert!(s.fork_child().is_none());
    // A loop may list a child's phase: then the parent runs it too.
    let mut w = wl(&src.replace("[\"f\", \"w\"]", "[\"c\", \"f\", \"w\"]"));
    assert_eq!(phase_marks(&ops(&mut w, 0)), [0, 1, 2, 0, 1, 2]);
}

#[test]
fn fork_and_wait_errors_name_the_key() {
    let base = "threads = 2\n[[workload.regions]]\nname = \"buf\"\npages = 8\n\
         [[workload.phases]]\nname = \"t\"\nkind = \"touch\"\nregion = \"buf\"\n\
         [[workload.phases]]\nname = \"w\"\nkind = \"wait\"\n";
    let fork =
        |keys: &str| format!("{base}[[workload.phases]]\nname = \"f\"\nkind = \"fork\"\n{keys}\n");
    let cases = [
        (
            fork(""),
            "`workload.phases[2].child`: a `fork` phase needs child",
        ),
        (fork("child = []"), "`workload.phases[2].child`"),
        (fork("child = \"t\""), "`workload.phases[2].child`"),
        (
            fork("child = [\"nope\"]"),
            "`workload.phases[2].child[0]`: unknown phase name \"nope\"",
        ),
        (
            fork("child = [\"t\", \"f\"]"),
            "`workload.phases[2].child[1]`: phase \"f\" is a `fork` phase",
        ),
        (
            fork("child = [\"w\"]"),
            "`workload.phases[2].child[0]`: phase \"w\" is a `wait` phase",
        ),
        (
            fork("child = [\"t\"]\ncount = 0"),
            "`workload.phases[2].count`: must be at least 1",
        ),
        (
            fork("child = [\"t\"]\ncount = -1"),
            "`workload.phases[2].count`",
        ),
        (
            fork("child = [\"t\"]\nthreads = [2]"),
            "`workload.phases[2].threads[0]`",
        ),
        // The touch runs on worker 0 only; worker 1's children would never run it.
        (
            fork("child = [\"t\"]\nthreads = [1]"),
            "`workload.phases[2].child[0]`: phase \"t\" runs on threads [0]",
        ),
        (
            fork("child = [\"t\"]\nregion = \"buf\""),
            "`workload.phases[2].region`: unknown field `region`",
        ),
        (
            format!("{base}[[workload.phases]]\nkind = \"wait\"\ncount = 1\n"),
            "`workload.phases[2].count`: unknown field `count`",
        ),
        (
            format!("{base}[[workload.phases]]\nkind = \"wait\"\nthreads = [0, 0]\n"),
            "`workload.phases[2].threads[1]`",
        ),
    ];
    for (src, key) in cases {
        match try_build(&src, 1) {
            Ok(_) => panic!("expected an error naming {key} for:\n{src}"),
            Err(e) => {
                assert!(e.to_string().starts_with("t.toml: key `"), "{e}");
                assert!(e.to_string().contains(key), "error {e} should name {key}");
            }
        }
    }
    // Without the bad keys it builds, and the kinds' key errors say the kind.
    try_build(&fork("child = [\"t\"]"), 1).unwrap_or_else(|e| panic!("{e}"));
    let e = try_build(&fork("child = [\"t\"]\nms = 1"), 1)
        .err()
        .unwrap();
    assert!(e.to_string().ends_with("(kind = \"fork\")"), "{e}");
}
