//! Processes that come and go: fork shares anonymous pages copy-on-write, a write copies or
//! reuses, exit frees an address space, exec starts a new one, wait reaps children. Each test
//! runs under the strict invariant checker.

mod common;

use common::{anon_rw, forking_process, tiered_config, Program, BASE, PAGE};
use tierlab::mm::page::pg;
use tierlab::mm::pgtable::pte;
use tierlab::sched::ThreadState;
use tierlab::stats::Vm;
use tierlab::workload::{Op, Placement};
use tierlab::Sim;

const PAGES: u64 = 64;

fn vpn(i: u64) -> u32 {
    ((BASE / PAGE) + i) as u32
}

fn writes(pages: std::ops::Range<u64>) -> impl Iterator<Item = Op> {
    pages.map(|i| Op::Store(BASE + i * PAGE))
}

fn reads(pages: std::ops::Range<u64>) -> impl Iterator<Item = Op> {
    pages.map(|i| Op::Load(BASE + i * PAGE))
}

/// Run without NUMA balancing (the pages stay where they are), stopping at `max_s` with
/// whatever still runs; no invariant violation allowed.
fn run(program: Program, max_s: &str) -> Sim {
    let cfg = tiered_config(&[
        "kernel.numa_balancing=0",
        &format!("sim.max_seconds={max_s}"),
    ]);
    let w = forking_process(vec![(Placement::Pinned(0), program)], vec![]);
    let mut sim = Sim::new(cfg, w).expect("sim");
    sim.run(&mut |_| {}).expect("run");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    sim
}

#[test]
fn fork_shares_anon_pages_until_a_write_copies_them() {
    // The parent writes 64 pages and forks; the child reads them all and writes the first
    // 16; both then sleep past the end of the run, so their page tables can be compared.
    let mut parent = vec![anon_rw(BASE, PAGES)];
    parent.extend(writes(0..PAGES));
    parent.push(Op::Fork);
    parent.push(Op::Sleep(1_000_000_000));
    let mut child: Vec<Op> = reads(0..PAGES).collect();
    child.extend(writes(0..16));
    child.push(Op::Sleep(1_000_000_000));
    let sim = run(
        Program::new(parent, vec![Program::new(child, vec![])]),
        "0.01",
    );
    let (p, c) = (&sim.k.mms[0], &sim.k.mms[1]);
    assert_eq!((p.rss_anon, c.rss_anon), (PAGES, PAGES));
    for i in 0..PAGES {
        let (pp, cp) = (p.pgtable.get(vpn(i)), c.pgtable.get(vpn(i)));
        assert!(pte::present(pp) && pte::present(cp));
        let page = sim.k.frames.get(pte::pfn(pp));
        if i < 16 {
            // wp_page_copy: the child has its own writable copy; the parent's page is its
            // alone again, but stays write-protected until it writes (wp_can_reuse).
            assert_ne!(pte::pfn(pp), pte::pfn(cp), "page {i}");
            assert!(cp & pte::WRITE != 0 && cp & pte::DIRTY != 0);
            assert_eq!(page.mapcount, 1);
            assert!(sim.k.frames.get(pte::pfn(cp)).has(pg::ANON_EXCLUSIVE));
        } else {
            assert_eq!(pte::pfn(pp), pte::pfn(cp), "page {i}");
            assert_eq!(page.mapcount, 2);
            assert!(!page.has(pg::ANON_EXCLUSIVE));
            assert!(cp & pte::WRITE == 0);
        }
        assert!(
            pp & pte::WRITE == 0,
            "fork write-protected the parent's PTE {i}"
        );
    }
    // The rmap reaches both mappings of a shared page.
    let shared = pte::pfn(p.pgtable.get(vpn(20)));
    assert_eq!(
        sim.k.rmap_mappings(shared),
        vec![(0, vpn(20)), (1, vpn(20))]
    );
}

#[test]
fn exit_frees_the_child_and_the_parent_reuses_its_pages_without_copying() {
    // The child writes 16 pages (copies) and exits; the parent waits for it, then writes
    // all 64: the child's copies went back to the allocator, and the parent's pages, no
    // longer shared, are reused in place.
    let mut parent = vec![anon_rw(BASE, PAGES)];
    parent.extend(writes(0..PAGES));
    parent.push(Op::Fork);
    parent.push(Op::Wait);
    parent.extend(writes(0..PAGES));
    parent.push(Op::Sleep(1_000_000_000));
    let child: Vec<Op> = writes(0..16).chain([Op::Exit]).collect();
    let sim = run(
        Program::new(parent, vec![Program::new(child, vec![])]),
        "0.01",
    );
    let allocated = sim.k.vm.get(Vm::PgAllocNormal);
    assert_eq!(
        allocated,
        PAGES + 16 + 2 + 1,
        "64 first touches, the child's 16 copies, its order-1 PGD and its one PTE table"
    );
    // Its PGD and PTE table went back at exit: the kernel holds no frame for it.
    let kernel_frames = (sim.k.frames.iter())
        .filter(|(_, p)| p.has(pg::USED) && p.has(pg::RESERVED))
        .count();
    let boot = run(Program::new(vec![Op::Sleep(1_000_000_000)], vec![]), "0.01");
    let at_boot = (boot.k.frames.iter())
        .filter(|(_, p)| p.has(pg::USED) && p.has(pg::RESERVED))
        .count();
    assert_eq!(kernel_frames, at_boot, "the child's page tables were freed");
    assert!(sim.k.mms[1].dead);
    assert_eq!(sim.k.mms[1].rss_anon, 0);
    let used = (sim.k.frames.iter())
        .filter(|(_, p)| p.has(pg::USED) && p.has(pg::ANON))
        .count() as u64;
    assert_eq!(used, PAGES, "only the parent's pages are in use");
    for i in 0..PAGES {
        let p = sim.k.mms[0].pgtable.get(vpn(i));
        assert!(p & pte::WRITE != 0, "page {i} reused writable");
        assert!(sim.k.frames.get(pte::pfn(p)).has(pg::ANON_EXCLUSIVE));
    }
    assert_eq!(sim.k.sched.threads[1].state, ThreadState::Exited);
    assert_eq!(sim.k.sched.threads[0].zombies, 0, "wait reaped the child");
}

#[test]
fn exec_replaces_the_address_space_and_frees_the_old_one() {
    // The child execs at once: its copy of the parent's pages goes, and it maps and writes
    // 8 pages of its own at the same address, which share nothing with the parent.
    let mut parent = vec![anon_rw(BASE, PAGES)];
    parent.extend(writes(0..PAGES));
    parent.push(Op::Fork);
    parent.push(Op::Sleep(1_000_000_000));
    let mut child = vec![Op::Exec, anon_rw(BASE, 8)];
    child.extend(writes(0..8));
    child.push(Op::Sleep(1_000_000_000));
    let sim = run(
        Program::new(parent, vec![Program::new(child, vec![])]),
        "0.01",
    );
    assert!(sim.k.mms[1].dead, "the forked mm went at exec");
    let new = sim.k.sched.threads[1].mm as usize;
    assert_eq!(new, 2);
    assert_eq!(sim.k.mms[new].rss_anon, 8);
    for i in 0..8 {
        let (pp, cp) = (
            sim.k.mms[0].pgtable.get(vpn(i)),
            sim.k.mms[new].pgtable.get(vpn(i)),
        );
        assert_ne!(pte::pfn(pp), pte::pfn(cp));
        // The exec'd copy dropped its references: the parent's pages are its alone.
        assert_eq!(sim.k.frames.get(pte::pfn(pp)).mapcount, 1);
    }
}

#[test]
fn wait_sleeps_until_a_child_exits() {
    // The child sleeps 5 ms before it exits; the parent's wait returns after that, not
    // before, and a second wait with no child left returns at once (ECHILD).
    let parent = vec![Op::Fork, Op::Wait, Op::Wait, Op::Exit];
    let child = vec![Op::Sleep(5_000_000), Op::Exit];
    let cfg = tiered_config(&["kernel.numa_balancing=0"]);
    let w = forking_process(
        vec![(
            Placement::Pinned(0),
            Program::new(parent, vec![Program::new(child, vec![])]),
        )],
        vec![],
    );
    let mut sim = Sim::new(cfg, w).unwrap();
    sim.run(&mut |_| {}).unwrap();
    let end_ms = sim.hw.cycles_to_s(sim.hw.end_cycles()) * 1e3;
    assert!(
        end_ms >= 5.0,
        "the run ended at {end_ms} ms, before the child's sleep"
    );
    assert!(sim
        .k
        .sched
        .threads
        .iter()
        .all(|t| t.state == ThreadState::Exited));
}
