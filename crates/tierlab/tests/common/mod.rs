//! Helpers shared by the integration tests: workloads from op lists, mappings, and a run
//! that insists on zero invariant violations.
#![allow(dead_code)]

use tierlab::workload::{
    prot, Backing, FileSpec, Op, OpBuf, OpList, Placement, ThreadSpec, Workload,
};
use tierlab::{Config, Sim};

/// 4 CPUs on a 16 MiB DRAM node plus a 64 MiB CPU-less slow node; demotion on, NUMA balancing
/// in tiering mode with a fast scanner, strict checks. `sets` override any key.
pub fn tiered_config(sets: &[&str]) -> Config {
    let text = r#"
[machine]
cpus = 4
[[machine.nodes]]
name = "dram"
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[[machine.nodes]]
name = "cxl"
capacity_mib = 64
read_latency_ns = 250
write_latency_ns = 250
read_bandwidth_gbps = 30
write_bandwidth_gbps = 30
[vm]
demotion_enabled = true
[kernel]
numa_balancing = 2
numa_balancing_scan_delay_ms = 5
numa_balancing_scan_period_min_ms = 10
numa_balancing_scan_size_mb = 16
[workload]
type = "test"
[sim]
check = "strict"
timeline_interval_ms = 5
"#;
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::from_str_with(text, "tiered.toml", None, &sets).unwrap()
}

pub const PAGE: u64 = 4096;
pub const BASE: u64 = 0x1000_0000;

pub fn workload(threads: Vec<(u32, Placement, Vec<Op>)>, files: Vec<FileSpec>) -> Workload {
    let processes = threads.iter().map(|t| t.0).max().unwrap_or(0) + 1;
    Workload {
        name: "test".into(),
        work_unit: "ops".into(),
        processes,
        files,
        threads: threads
            .into_iter()
            .map(|(p, placement, ops)| ThreadSpec {
                process: p,
                placement,
                stream: Box::new(OpList::new(ops)),
            })
            .collect(),
        info: vec![],
        phases: vec![],
        regions: vec![],
        expected: None,
    }
}

pub fn anon_rw(addr: u64, pages: u64) -> Op {
    Op::Mmap {
        addr,
        len: pages * PAGE,
        prot: prot::READ | prot::WRITE,
        backing: Backing::Anon,
    }
}

pub fn file_ro(addr: u64, pages: u64) -> Op {
    Op::Mmap {
        addr,
        len: pages * PAGE,
        prot: prot::READ,
        backing: Backing::File { file: 0, pgoff: 0 },
    }
}

/// Read `file_pages` pages of file 0 mapped at `fbase`, then write `anon_pages` anonymous
/// pages at BASE: page cache first, then anon that presses on it.
pub fn file_then_anon(fbase: u64, file_pages: u64, anon_pages: u64) -> Vec<Op> {
    let mut ops = vec![file_ro(fbase, file_pages)];
    ops.extend((0..file_pages).map(|i| Op::Load(fbase + i * PAGE)));
    ops.push(anon_rw(BASE, anon_pages));
    ops.extend((0..anon_pages).map(|i| Op::Store(BASE + i * PAGE)));
    ops
}

pub fn run(cfg: Config, w: Workload) -> Sim {
    let mut sim = Sim::new(cfg, w).expect("sim");
    sim.run(&mut |_| {}).expect("run");
    assert_eq!(
        sim.k.checker.count, 0,
        "invariant violations: {:?}",
        sim.k.checker.violations
    );
    assert!(sim.k.checker.checks_run > 0);
    sim
}

/// One process whose threads are given by placement.
pub fn one_process(threads: Vec<(Placement, Vec<Op>)>, files: Vec<FileSpec>) -> Workload {
    workload(
        threads.into_iter().map(|(p, ops)| (0, p, ops)).collect(),
        files,
    )
}

/// Thread 0 writes `pages` pages in order (DRAM fills first, the rest lands on the slow node);
/// then four threads each do `reads` loads of pages `first..first + span` picked by a
/// per-thread LCG seeded `seed + thread`, with `compute` cycles after each.
pub fn fill_then_random_reads(
    pages: u64,
    (first, span): (u64, u64),
    reads: u64,
    seed: u64,
    compute: u32,
) -> Workload {
    let mut t0 = vec![anon_rw(BASE, pages)];
    t0.extend((0..pages).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    let mut threads = vec![];
    for t in 0..4u64 {
        let mut ops = if t == 0 {
            t0.clone()
        } else {
            vec![Op::Barrier]
        };
        let mut x = seed + t;
        for _ in 0..reads {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ops.push(Op::Load(BASE + (first + (x >> 33) % span) * PAGE));
            ops.push(Op::Compute(compute));
        }
        threads.push((Placement::Pinned(t as u32), ops));
    }
    one_process(threads, vec![])
}

/// One DRAM node of `node_mib`, 4 CPUs, a `kind` swap device of `swap_mib`, strict checks.
pub fn swap_config(node_mib: u64, kind: &str, swap_mib: u64, sets: &[&str]) -> Config {
    let text = format!(
        r#"
[machine]
cpus = 4
[[machine.nodes]]
name = "dram"
capacity_mib = {node_mib}
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[[machine.swap]]
kind = "{kind}"
size_mib = {swap_mib}
compression_ratio = 2.0
[workload]
type = "test"
[sim]
check = "strict"
timeline_interval_ms = 1
"#
    );
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::from_str_with(&text, "swap.toml", None, &sets).unwrap()
}

/// madvise(BASE, pages, MADV_PAGEOUT).
pub fn pageout(pages: u64) -> Op {
    Op::Madvise {
        addr: BASE,
        len: pages * PAGE,
        advice: tierlab::workload::advice::MADV_PAGEOUT,
    }
}

/// Process 0's PTEs of the `pages` pages from BASE.
pub fn ptes(sim: &Sim, pages: u64) -> Vec<u64> {
    (0..pages)
        .map(|i| sim.k.mms[0].pgtable.get(((BASE / PAGE) + i) as u32))
        .collect()
}

/// A program that forks: its ops, and for each `Op::Fork` among them, in order, the child's
/// program.
pub struct Program {
    pub ops: Vec<Op>,
    pub children: std::collections::VecDeque<Program>,
    next: usize,
}

impl Program {
    pub fn new(ops: Vec<Op>, children: Vec<Program>) -> Program {
        let forks = ops.iter().filter(|o| matches!(o, Op::Fork)).count();
        assert_eq!(forks, children.len(), "one child program per fork");
        Program {
            ops,
            children: children.into(),
            next: 0,
        }
    }
}

impl tierlab::workload::ThreadStream for Program {
    fn refill(&mut self, out: &mut OpBuf) {
        let end = (self.next + 1024).min(self.ops.len());
        out.extend_from_slice(&self.ops[self.next..end]);
        self.next = end;
    }

    fn fork_child(&mut self) -> Option<Box<dyn tierlab::workload::ThreadStream>> {
        let child = self.children.pop_front()?;
        Some(Box::new(child))
    }
}

/// One process of forking threads.
pub fn forking_process(threads: Vec<(Placement, Program)>, files: Vec<FileSpec>) -> Workload {
    Workload {
        name: "test".into(),
        work_unit: "ops".into(),
        processes: 1,
        files,
        threads: threads
            .into_iter()
            .map(|(placement, program)| ThreadSpec {
                process: 0,
                placement,
                stream: Box::new(program),
            })
            .collect(),
        info: vec![],
        phases: vec![],
        regions: vec![],
        expected: None,
    }
}
