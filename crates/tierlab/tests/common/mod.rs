//! Helpers shared by the integration tests: workloads from op lists, mappings, and a run
//! that insists on zero invariant violations.
#![allow(dead_code)]

use tierlab::workload::{prot, Backing, FileSpec, Op, OpList, Placement, ThreadSpec, Workload};
use tierlab::{Config, Sim};

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

pub fn run(cfg: Config, w: Workload) -> Sim {
    let mut sim = Sim::new(cfg, w).expect("sim");
    sim.run(&mut |_| {}).expect("run");
    assert_eq!(
        sim.checker.count, 0,
        "invariant violations: {:?}",
        sim.checker.violations
    );
    assert!(sim.checker.checks_run > 0);
    sim
}

/// One process whose threads are given by placement.
pub fn one_process(threads: Vec<(Placement, Vec<Op>)>, files: Vec<FileSpec>) -> Workload {
    workload(
        threads.into_iter().map(|(p, ops)| (0, p, ops)).collect(),
        files,
    )
}
