//! Randomized stress of MIGRC under the strict invariant checker: eight threads in two
//! processes on four CPUs, over a million operations of reads, writes, mprotect toggles,
//! munmap + mmap at the same address, move_pages, file reads under reclaim, and continuous
//! NUMA-balancing promotion and demotion; and a second run with process churn: the same
//! threads fork children that share their memory copy-on-write, write it, exec, map and
//! touch memory of their own and exit, while their parents wait for them.

mod common;

use common::{workload, Program, PAGE};
use tierlab::check::ViolationKind;
use tierlab::stats::Vm;
use tierlab::workload::{prot, Backing, FileSpec, Op, Placement};
use tierlab::{Config, Sim};

const OWN_PAGES: u64 = 640;
const SHARED_PAGES: u64 = 512;
const FILE_PAGES: u64 = 1024;
const OPS_PER_THREAD: usize = 135_000;

fn config(migrc_break: &str) -> Config {
    let text = r#"
[machine]
cpus = 4
[[machine.nodes]]
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[[machine.nodes]]
capacity_mib = 32
read_latency_ns = 250
write_latency_ns = 250
[vm]
demotion_enabled = true
[kernel]
migrc = "on"
numa_balancing = 2
numa_balancing_scan_delay_ms = 2
numa_balancing_scan_period_min_ms = 5
numa_balancing_scan_size_mb = 4
sched_base_slice_ns = 200000
[workload]
type = "stress"
[sim]
check = "strict"
timeline_interval_ms = 2
"#;
    let set = format!("debug.migrc_break=\"{migrc_break}\"");
    Config::from_str_with(text, "stress.toml", None, &[set]).unwrap()
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn rw(addr: u64, pages: u64) -> Op {
    Op::Mmap {
        addr,
        len: pages * PAGE,
        prot: prot::READ | prot::WRITE,
        backing: Backing::Anon,
    }
}

/// One thread's random program. Thread 0 of each process maps the shared region (and, in
/// process 0, the file) before a barrier; every thread then works on its own region and the
/// shared one.
fn thread_ops(process: u32, index: u32, seed: u64) -> Vec<Op> {
    let mut r = Lcg(seed);
    let own = 0x1000_0000 + ((process as u64 * 4 + index as u64) << 24);
    let shared = 0x8000_0000;
    let file = 0x4000_0000;
    let mut ops = Vec::with_capacity(OPS_PER_THREAD + 64);
    if index == 0 {
        ops.push(rw(shared, SHARED_PAGES));
        if process == 0 {
            ops.push(Op::Mmap {
                addr: file,
                len: FILE_PAGES * PAGE,
                prot: prot::READ,
                backing: Backing::File { file: 0, pgoff: 0 },
            });
        }
    }
    ops.push(rw(own, OWN_PAGES));
    ops.push(Op::Barrier);
    // First touch: every page of the own region, and (thread 0) the shared region and file.
    ops.extend((0..OWN_PAGES).map(|i| Op::Store(own + i * PAGE)));
    if index == 0 {
        // Promoted copies of shared pages come back read-only; the writes below upgrade them
        // while other CPUs may still read the old copy.
        ops.extend((0..SHARED_PAGES).map(|i| Op::Store(shared + i * PAGE)));
        if process == 0 {
            ops.extend((0..FILE_PAGES).map(|i| Op::Load(file + i * PAGE)));
        }
    }
    ops.push(Op::Barrier);
    let mut own_writable = true;
    while ops.len() < OPS_PER_THREAD {
        match r.below(1000) {
            0..=419 => {
                let page = r.below(OWN_PAGES);
                ops.push(Op::Load(own + page * PAGE + r.below(PAGE)));
            }
            420..=559 => ops.push(Op::Load(shared + r.below(SHARED_PAGES) * PAGE)),
            560..=699 => {
                if own_writable {
                    ops.push(Op::Store(own + r.below(OWN_PAGES) * PAGE));
                } else {
                    ops.push(Op::Store(shared + r.below(SHARED_PAGES) * PAGE));
                }
            }
            700..=799 => {
                if process == 0 {
                    ops.push(Op::Load(file + r.below(FILE_PAGES) * PAGE));
                } else {
                    ops.push(Op::Load(shared + r.below(SHARED_PAGES) * PAGE));
                }
            }
            800..=809 => {
                // mprotect part of the own region, toggling write permission.
                own_writable = !own_writable;
                let p = if own_writable {
                    prot::READ | prot::WRITE
                } else {
                    prot::READ
                };
                ops.push(Op::Mprotect {
                    addr: own,
                    len: OWN_PAGES * PAGE,
                    prot: p,
                });
            }
            810 => {
                // munmap + mmap at the same address: the hazard LUF's reviewers raised.
                ops.push(Op::Munmap {
                    addr: own,
                    len: OWN_PAGES * PAGE,
                });
                ops.push(rw(own, OWN_PAGES));
                ops.extend((0..OWN_PAGES).map(|i| Op::Store(own + i * PAGE)));
                own_writable = true;
            }
            814..=821 => {
                let start = r.below(OWN_PAGES - 32);
                ops.push(Op::MovePages {
                    addr: own + start * PAGE,
                    len: 32 * PAGE,
                    node: r.below(2) as u32,
                });
            }
            _ => ops.push(Op::Compute(200 + r.below(2000) as u32)),
        }
    }
    ops
}

fn run_stress(migrc_break: &str) -> Sim {
    let mut threads = Vec::new();
    for process in 0..2u32 {
        for index in 0..4u32 {
            threads.push((
                process,
                Placement::Spread,
                thread_ops(process, index, 7 + (process * 4 + index) as u64),
            ));
        }
    }
    let total_ops: usize = threads.iter().map(|t| t.2.len()).sum();
    assert!(total_ops >= 1_000_000, "{total_ops} operations");
    let w = workload(
        threads,
        vec![FileSpec {
            name: "data".into(),
            pages: FILE_PAGES,
            shmem: false,
        }],
    );
    let mut sim = Sim::new(config(migrc_break), w).unwrap();
    sim.run(&mut |_| {}).expect("the stress run completes");
    sim
}

#[test]
fn a_million_random_operations_with_migrc_keep_every_invariant() {
    let sim = run_stress("none");
    assert_eq!(
        sim.k.checker.count, 0,
        "violations: {:?}",
        sim.k.checker.violations
    );
    assert!(sim.k.checker.checks_run > 10);
    let v = |c| sim.k.vm.get(c);
    // Every mechanism was exercised.
    assert!(v(Vm::MigrcDeferred) > 0, "MIGRC deferred nothing");
    assert!(v(Vm::MigrcFlushAlloc) > 0);
    assert!(
        v(Vm::MigrcFlushUpgrade) > 0,
        "write upgrades gave up deferrals"
    );
    assert!(v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect) > 0);
    assert!(v(Vm::PgPromoteSuccess) > 0);
    assert!(v(Vm::NumaHintFaults) > 0);
    assert!(v(Vm::PgMigrateSuccess) > v(Vm::PgPromoteSuccess));
    assert!(v(Vm::PgStealFile) > 0, "reclaim dropped file pages");
    let ipis: u64 = sim.hw.cpus.iter().map(|c| c.irq.tlb).sum();
    assert!(ipis > 0);
}

/// Of the three deliberate breaks, skipping munmap's flush surfaces in the random run. The
/// other two rarely do here: demotion picks cold folios that few TLBs still hold when their
/// frame is reused or their page is written again, and other flushes keep retiring the pending
/// generations. Targeted tests in tests/migrc.rs (`checker_catches_reuse_without_the_deferred_flush`,
/// `checker_catches_a_write_after_upgrade_without_flush`) construct those hazards directly.
#[test]
fn the_munmap_break_is_caught_in_the_stress_run() {
    let sim = run_stress("munmap_flush");
    assert!(
        sim.k.checker.count_of(ViolationKind::StaleAfterUnmap) > 0,
        "expected StaleAfterUnmap, got {:?}",
        sim.k.checker.violations.first()
    );
}

const CHURN_OPS_PER_THREAD: usize = 110_000;

/// A child's program, forked by a thread whose own region is at `own`: it reads and writes
/// the memory it shares copy-on-write with its parent, may fork a grandchild (`depth` > 0),
/// and in half the cases execs, maps 64 pages of its own at the same address, touches them
/// and moves some; then it exits (unmapping nothing first: exit_mmap frees it all).
fn child_program(r: &mut Lcg, own: u64, shared: u64, depth: u32) -> Program {
    let mut ops = Vec::new();
    let mut children = Vec::new();
    for _ in 0..200 + r.below(400) {
        match r.below(10) {
            0..=4 => ops.push(Op::Load(own + r.below(OWN_PAGES) * PAGE)),
            5 | 6 => ops.push(Op::Store(own + r.below(OWN_PAGES / 4) * PAGE)),
            7 => ops.push(Op::Load(shared + r.below(SHARED_PAGES) * PAGE)),
            8 => ops.push(Op::Store(shared + r.below(SHARED_PAGES / 8) * PAGE)),
            _ => ops.push(Op::Compute(100 + r.below(1000) as u32)),
        }
    }
    if depth > 0 && r.below(4) == 0 {
        ops.push(Op::Fork);
        children.push(child_program(r, own, shared, depth - 1));
    }
    if r.below(2) == 0 {
        ops.push(Op::Exec);
        ops.push(rw(own, 64));
        ops.extend((0..64).map(|i| Op::Store(own + i * PAGE)));
        ops.push(Op::MovePages {
            addr: own,
            len: 32 * PAGE,
            node: r.below(2) as u32,
        });
        ops.extend((0..200).map(|_| Op::Load(own + r.below(64) * PAGE)));
    }
    // A child that forked waits for its own child half the time (the other half, init
    // reaps the orphan).
    if !children.is_empty() && r.below(2) == 0 {
        ops.push(Op::Wait);
    }
    ops.push(Op::Exit);
    Program::new(ops, children)
}

/// A root thread of the churn run: the random program of the first run, which every 1,500
/// operations or so forks a child (waiting first for the one before, so that at most one
/// of its children runs at a time) and waits for the last one at the end.
fn churn_program(process: u32, index: u32, seed: u64) -> Program {
    let mut r = Lcg(seed ^ 0x9e37_79b9);
    let own = 0x1000_0000 + ((process as u64 * 4 + index as u64) << 24);
    let shared = 0x8000_0000;
    let base = thread_ops(process, index, seed);
    let mut ops = Vec::with_capacity(CHURN_OPS_PER_THREAD + 64);
    let mut children = Vec::new();
    let mut own_writable = true;
    for op in base.into_iter().take(CHURN_OPS_PER_THREAD) {
        if let Op::Mprotect { prot: p, .. } = op {
            own_writable = p & prot::WRITE != 0;
        }
        if let Op::Mmap { .. } = op {
            own_writable = true;
        }
        ops.push(op);
        // Fork only where the own region is writable and mapped (after the barriers).
        if ops.len() > 2 * OWN_PAGES as usize && own_writable && r.below(1500) == 0 {
            if !children.is_empty() {
                ops.push(Op::Wait);
            }
            ops.push(Op::Fork);
            children.push(child_program(&mut r, own, shared, 1));
        }
    }
    ops.push(Op::Wait);
    Program::new(ops, children)
}

#[test]
fn fork_exit_churn_with_migrc_keeps_every_invariant() {
    let threads = (0..2u32)
        .flat_map(|process| (0..4u32).map(move |index| (process, index)))
        .map(|(process, index)| {
            let program = churn_program(process, index, 7 + (process * 4 + index) as u64);
            (process, program)
        });
    let mut programs = Vec::new();
    for (process, program) in threads {
        programs.push((process, program));
    }
    fn count(p: &Program) -> (usize, usize) {
        p.children
            .iter()
            .map(count)
            .fold((p.ops.len(), 1), |a, b| (a.0 + b.0, a.1 + b.1))
    }
    let (total_ops, processes) = programs
        .iter()
        .map(|(_, p)| count(p))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(total_ops >= 1_000_000, "{total_ops} operations");
    let mut w = workload(
        vec![],
        vec![FileSpec {
            name: "data".into(),
            pages: FILE_PAGES,
            shmem: false,
        }],
    );
    w.processes = 2;
    w.threads = programs
        .into_iter()
        .map(|(process, program)| tierlab::workload::ThreadSpec {
            process,
            placement: Placement::Spread,
            stream: Box::new(program),
        })
        .collect();
    let mut sim = Sim::new(config("none"), w).unwrap();
    sim.run(&mut |_| {}).expect("the churn run completes");
    assert_eq!(
        sim.k.checker.count, 0,
        "violations: {:?}",
        sim.k.checker.violations
    );
    // Every forked process ran and exited, and was torn down.
    let forked = sim.k.sched.threads.len() - 8;
    assert_eq!(forked + 8, processes, "every child program was forked");
    assert!(forked > 400, "{forked} processes forked");
    assert!(sim
        .k
        .sched
        .threads
        .iter()
        .all(|t| t.state == tierlab::sched::ThreadState::Exited));
    let dead = sim.k.mms.iter().filter(|mm| mm.dead).count();
    assert!(
        dead >= forked,
        "{dead} address spaces torn down for {forked} forks"
    );
    let v = |c| sim.k.vm.get(c);
    assert!(v(Vm::MigrcDeferred) > 0, "MIGRC deferred nothing");
    assert!(v(Vm::MigrcFlushAlloc) > 0);
    assert!(v(Vm::PgPromoteSuccess) > 0);
    assert!(v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect) > 0);
}
