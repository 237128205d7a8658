//! The operations scripted micro-benchmarks use: madvise, sleep, rate control, phase marks and
//! region residency in the timeline.

mod common;

use common::{anon_rw, run, workload, BASE, PAGE};
use tierlab::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{advice, prot, Backing, FileSpec, Mark, Op, Placement, RegionSpec};
use tierlab::Config;

fn config(cpus: u32) -> Config {
    config_with(cpus, &[])
}

fn config_with(cpus: u32, sets: &[&str]) -> Config {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let text = format!(
        "[machine]\ncpus = {cpus}\n[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 100\nwrite_latency_ns = 100\ncpus = \"0-{}\"\n[[machine.nodes]]\ncapacity_mib = 64\nread_latency_ns = 200\nwrite_latency_ns = 200\n[workload]\ntype = \"t\"\n[sim]\ncheck = \"strict\"\ntimeline_interval_ms = 1\n",
        cpus - 1
    );
    Config::from_str_with(&text, "t.toml", None, &sets).unwrap()
}

fn one(ops: Vec<Op>) -> tierlab::workload::Workload {
    workload(vec![(0, Placement::Pinned(0), ops)], vec![])
}

#[test]
fn pace_holds_the_access_rate_within_five_percent() {
    // 2,000 accesses at 1 µs intervals: 1,000,000 accesses per second.
    let mut ops = vec![anon_rw(BASE, 16), Op::Mark(Mark::Phase(0))];
    for i in 0..2000u64 {
        ops.push(Op::Pace(1000));
        ops.push(Op::Load(BASE + (i % 16) * PAGE));
    }
    let mut w = one(ops);
    w.phases = vec!["paced".into()];
    let sim = run(config(1), w);
    let p = &sim.phase_stats[0];
    let secs = sim.hw.cycles_to_s(p.cycles);
    let rate = p.accesses as f64 / secs;
    assert_eq!(p.accesses, 2000);
    assert!((rate - 1e6).abs() / 1e6 < 0.05, "rate {rate}");
}

#[test]
fn a_paced_sleep_charges_the_measured_nanosleep_ahead_or_past() {
    // 100 slots of 10 µs; the first opens the schedule (its slot is now, so past), the rest
    // lie ahead unless the work between them outlasts the interval.
    let sys = |sets: &[&str], work: u32| {
        let mut ops = Vec::new();
        for _ in 0..100 {
            ops.push(Op::Pace(10_000));
            ops.push(Op::Compute(work));
        }
        run(config_with(1, sets), one(ops)).hw.cpus[0].sys_cycles
    };
    let costs = [
        "cost.nanosleep_cycles=2000",
        "cost.nanosleep_past_cycles=300",
    ];
    assert_eq!(sys(&costs, 1000) - sys(&[], 1000), 99 * 2000 + 300);
    // Work of 100 µs between slots: every slot has passed when the thread reaches it.
    assert_eq!(sys(&costs, 220_000) - sys(&[], 220_000), 100 * 300);
}

#[test]
fn sleep_leaves_the_cpu_for_the_given_time() {
    let ops = vec![Op::Compute(1000), Op::Sleep(5_000_000), Op::Compute(1000)];
    let sim = run(config(1), one(ops));
    let s = sim.hw.cycles_to_s(sim.hw.end_cycles());
    assert!((0.005..0.0051).contains(&s), "{s}");
    assert!(
        sim.hw.cpus[0].user_cycles < 10_000,
        "sleeping is not user time"
    );
}

#[test]
fn madvise_dontneed_frees_and_the_next_read_sees_zeroes() {
    let mut ops = vec![anon_rw(BASE, 32)];
    ops.extend((0..32).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(Op::Madvise {
        addr: BASE,
        len: 32 * PAGE,
        advice: advice::MADV_DONTNEED,
    });
    ops.push(Op::Load(BASE));
    let sim = run(config(1), one(ops));
    assert_eq!(sim.k.nodes[0].nr_anon, 0);
    assert_eq!(sim.k.vm.get(Vm::PgFree), 32);
    assert_eq!(
        pte::pfn(sim.k.mms[0].pgtable.get((BASE / PAGE) as u32)),
        sim.k.zero_pfn
    );
}

#[test]
fn madvise_cold_deactivates_and_clears_young() {
    let mut ops = vec![anon_rw(BASE, 8)];
    ops.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(Op::Madvise {
        addr: BASE,
        len: 8 * PAGE,
        advice: advice::MADV_COLD,
    });
    let mut sim = run(config(1), one(ops));
    // The run's MADV_COLD cleared the young bits; now make the pages active and advise again.
    for i in 0..8u64 {
        let p = pte::pfn(sim.k.mms[0].pgtable.get((BASE / PAGE + i) as u32));
        assert_eq!(
            sim.k.mms[0].pgtable.get((BASE / PAGE + i) as u32) & pte::YOUNG,
            0
        );
        let node = &mut sim.k.nodes[0];
        sim.k.frames.list_del(&mut node.lru[LRU_INACTIVE_ANON], p);
        sim.k.frames.get_mut(p).flags |= tierlab::mm::page::pg::ACTIVE;
        sim.k.frames.list_add(&mut node.lru[LRU_ACTIVE_ANON], p);
    }
    assert_eq!(sim.k.nodes[0].lru_size(LRU_ACTIVE_ANON), 8);
    // The thread has exited but the mm is still there: advise again directly.
    sim.k
        .sys_madvise(&mut sim.hw, 0, 0, BASE, 8 * PAGE, advice::MADV_COLD)
        .unwrap();
    assert_eq!(sim.k.nodes[0].lru_size(LRU_ACTIVE_ANON), 0);
    assert_eq!(sim.k.nodes[0].lru_size(LRU_INACTIVE_ANON), 8);
    assert_eq!(sim.k.vm.get(Vm::PgDeactivate), 8);
}

#[test]
fn madvise_pageout_drops_clean_file_pages_and_keeps_anon_without_swap() {
    let fbase = 0x4000_0000;
    let mut ops = vec![
        anon_rw(BASE, 16),
        Op::Mmap {
            addr: fbase,
            len: 16 * PAGE,
            prot: prot::READ,
            backing: Backing::File { file: 0, pgoff: 0 },
        },
    ];
    ops.extend((0..16).map(|i| Op::Store(BASE + i * PAGE)));
    ops.extend((0..16).map(|i| Op::Load(fbase + i * PAGE)));
    ops.push(Op::Madvise {
        addr: BASE,
        len: 16 * PAGE,
        advice: advice::MADV_PAGEOUT,
    });
    ops.push(Op::Madvise {
        addr: fbase,
        len: 16 * PAGE,
        advice: advice::MADV_PAGEOUT,
    });
    let sim = run(
        config(1),
        workload(
            vec![(0, Placement::Pinned(0), ops)],
            vec![FileSpec {
                name: "f".into(),
                pages: 16,
                shmem: false,
            }],
        ),
    );
    assert_eq!(sim.k.nodes[0].nr_file, 0, "clean file pages were reclaimed");
    assert_eq!(sim.k.vm.get(Vm::PgStealFile), 16);
    assert_eq!(sim.k.nodes[0].nr_anon, 16, "no swap: anon stays resident");
    assert_eq!(sim.k.pageout_kept_no_swap, 16);
    assert_eq!(
        sim.k.vm.get(Vm::PgDemoteDirect) + sim.k.vm.get(Vm::PgDemoteKswapd),
        0,
        "no demotion"
    );
}

#[test]
fn phases_accumulate_over_loop_iterations_and_count_their_faults() {
    let mut t0 = vec![anon_rw(BASE, 8)];
    for _ in 0..3 {
        t0.push(Op::Mark(Mark::Phase(0)));
        t0.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
        t0.push(Op::Barrier);
        t0.push(Op::Mark(Mark::Phase(1)));
        t0.push(Op::Madvise {
            addr: BASE,
            len: 8 * PAGE,
            advice: advice::MADV_DONTNEED,
        });
        t0.push(Op::Barrier);
    }
    let t1 = vec![Op::Barrier; 6];
    let mut w = workload(
        vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)],
        vec![],
    );
    w.phases = vec!["touch".into(), "dontneed".into()];
    let sim = run(config(2), w);
    let touch = &sim.phase_stats[0];
    assert_eq!(touch.instances, 3);
    assert_eq!(touch.accesses, 24);
    assert_eq!(
        touch.vm_delta.get(Vm::PgFault),
        24,
        "every touch faults after DONTNEED"
    );
    assert!(touch.cycles > 0);
    let dn = &sim.phase_stats[1];
    assert_eq!(dn.instances, 3);
    assert_eq!(dn.vm_delta.get(Vm::PgFree), 24);
    assert_eq!(dn.accesses, 0);
}

#[test]
fn the_timeline_reports_region_residency_per_node() {
    let mut ops = vec![anon_rw(BASE, 64)];
    ops.extend((0..64).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(Op::MovePages {
        addr: BASE,
        len: 16 * PAGE,
        node: 1,
    });
    ops.push(Op::Compute(5_000_000));
    let mut w = one(ops);
    w.regions = vec![RegionSpec {
        name: "buf".into(),
        process: 0,
        start: BASE,
        len: 64 * PAGE,
    }];
    let sim = run(config(1), w);
    let last = sim.timeline.last().unwrap();
    assert_eq!(last.regions[0], vec![48, 16]);
    let j = tierlab::RunResult::collect(&sim, 0.0).to_json();
    assert_eq!(
        j["timeline"].as_array().unwrap().last().unwrap()["regions"]["buf"],
        serde_json::json!([48, 16])
    );
}

#[test]
fn a_joining_main_thread_waits_for_the_workers_and_skips_their_barriers() {
    // main: map, start the workers (barrier), pthread_join. The workers meet at a second
    // barrier without the main thread (it would deadlock if a joiner counted), then exit;
    // the main thread returns only after both have exited.
    let main = vec![anon_rw(BASE, 16), Op::Barrier, Op::Join, Op::Exit];
    let worker = |cycles: u32| {
        vec![
            Op::Barrier,
            Op::Store(BASE),
            Op::Compute(cycles),
            Op::Barrier,
            Op::Compute(cycles),
            Op::Exit,
        ]
    };
    let w = workload(
        vec![
            (0, Placement::Pinned(0), main),
            (0, Placement::Pinned(1), worker(2_000_000)),
            (0, Placement::Pinned(2), worker(4_000_000)),
        ],
        vec![],
    );
    let sim = run(config(3), w);
    let t = &sim.k.sched.threads;
    assert!(t
        .iter()
        .all(|x| x.state == tierlab::sched::ThreadState::Exited));
    // The main thread ran only its mmap and the join: far less than one worker's compute.
    assert!(t[0].runtime < 1_000_000, "main ran {}", t[0].runtime);
    // Both workers left the second barrier together: worker 1 waited for worker 2 (4 M
    // cycles) before its last 2 M, not 2 M + 2 M.
    assert!(
        sim.hw.cpus[1].clock >= 6_000_000,
        "{}",
        sim.hw.cpus[1].clock
    );
    // The main thread's CPU waited until the last worker was done.
    assert!(
        sim.hw.cpus[0].clock >= 8_000_000,
        "{}",
        sim.hw.cpus[0].clock
    );
    // init_numa_balancing: the main thread is the first; the workers are CLONE_VM threads.
    assert_eq!(t[0].numa_node_stamp, 0);
    assert!(t[1].numa_node_stamp > 0 && t[2].numa_node_stamp > 0);
}
