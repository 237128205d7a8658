//! `type = "kbuild"`: N kernel builds side by side, each a `make -jJ` that keeps J compiler
//! processes running, as the 0-Day kbuild test of seed 002 does (8 instances of `make -j28`
//! on 224 CPUs; lkp-tests jobs/kbuild.yaml). A compile is a process forked by make that
//! execs the compiler, maps the build tree's headers (shared page cache, one tree per
//! instance), touches its own heap page by page between stretches of computation, and
//! exits, its memory freed at once; make waits for a job before it forks the next.
//!
//! Sizes (defaults): a compile runs `compile_ms` of CPU time and takes `faults_per_s` page
//! faults per second of it, 31,800: the LKP report on commit 51a755c56dc0 ("mm: tune PCP
//! high automatically"; 0-Day archive 20231117/202311171535.870e7726-oliver.sang@intel.com)
//! measured 5.92 M minor faults per second with 23.25 CPUs busy per instance, 186 in all.
//! How long one compile runs is not measured there: 790 ms is an [estimate] (the run's
//! 15,891 CPU-seconds per build over an assumed 20,000 compiles).

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{
    prot, Backing, FileSpec, Mark, Op, OpBuf, Placement, ThreadSpec, ThreadStream, Workload,
};

const PAGE: u64 = 4096;
/// Where a compile maps its headers and its heap.
const TREE_BASE: u64 = 0x10_0000_0000;
const HEAP_BASE: u64 = 0x20_0000_0000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(rename = "type")]
    _kind: String,
    /// Builds side by side.
    instances: u32,
    /// make -jJ: compiles each build keeps running.
    jobs: u32,
    /// Compiles each build runs in all.
    compiles: u32,
    /// CPU time of one compile, ms.
    #[serde(default = "default_compile_ms")]
    compile_ms: f64,
    /// Page faults per second of a compile's CPU time.
    #[serde(default = "default_faults_per_s")]
    faults_per_s: f64,
    /// Pages of headers each compile reads from its build tree (in the page cache).
    #[serde(default = "default_header_pages")]
    header_pages: u64,
}

fn default_compile_ms() -> f64 {
    790.0
}
fn default_faults_per_s() -> f64 {
    31_800.0
}
fn default_header_pages() -> u64 {
    256
}

/// One compile: exec, read the headers, write the heap page by page with the computation
/// spread between the faults, count one unit of work, exit.
struct Compile {
    file: u32,
    header_pages: u64,
    heap_pages: u64,
    gap_cycles: u32,
    next: u64,
    started: bool,
    done: bool,
}

impl ThreadStream for Compile {
    fn refill(&mut self, out: &mut OpBuf) {
        if self.done {
            return;
        }
        if !self.started {
            self.started = true;
            out.push(Op::Exec);
            out.push(Op::Mmap {
                addr: TREE_BASE,
                len: self.header_pages * PAGE,
                prot: prot::READ,
                backing: Backing::File {
                    file: self.file,
                    pgoff: 0,
                },
            });
            out.extend((0..self.header_pages).map(|i| Op::Load(TREE_BASE + i * PAGE)));
            out.push(Op::Mmap {
                addr: HEAP_BASE,
                len: self.heap_pages * PAGE,
                prot: prot::READ | prot::WRITE,
                backing: Backing::Anon,
            });
        }
        let end = (self.next + 512).min(self.heap_pages);
        for i in self.next..end {
            out.push(Op::Compute(self.gap_cycles));
            out.push(Op::Store(HEAP_BASE + i * PAGE));
        }
        self.next = end;
        if self.next == self.heap_pages {
            out.push(Op::Mark(Mark::Work(1)));
            out.push(Op::Exit);
            self.done = true;
        }
    }
}

/// make: fork a compile whenever fewer than `jobs` run, until `compiles` have started;
/// then wait for the rest.
struct Make {
    compile: Compile,
    jobs: u32,
    compiles: u32,
    started: u32,
    running: u32,
    done: bool,
}

impl ThreadStream for Make {
    fn refill(&mut self, out: &mut OpBuf) {
        if self.done {
            return;
        }
        while self.started < self.compiles && out.len() < 256 {
            if self.running == self.jobs {
                out.push(Op::Wait);
                self.running -= 1;
            }
            out.push(Op::Fork);
            self.started += 1;
            self.running += 1;
        }
        if self.started == self.compiles {
            out.extend((0..self.running).map(|_| Op::Wait));
            out.push(Op::Exit);
            self.done = true;
        }
    }

    fn fork_child(&mut self) -> Option<Box<dyn ThreadStream>> {
        let c = &self.compile;
        Some(Box::new(Compile {
            file: c.file,
            header_pages: c.header_pages,
            heap_pages: c.heap_pages,
            gap_cycles: c.gap_cycles,
            next: 0,
            started: false,
            done: false,
        }))
    }
}

/// Build the workload from the scenario's `[workload]` table.
pub fn build(
    table: &toml::Table,
    origin: &str,
    cpus: u32,
    cpu_ghz: f64,
) -> Result<Workload, ConfigError> {
    let raw: Raw = typed(toml::Value::Table(table.clone()), origin, "workload")?;
    let err = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
    if raw.instances == 0 || raw.instances > cpus {
        return Err(err(
            "instances",
            format!("must be between 1 and {cpus}, found {}", raw.instances),
        ));
    }
    if raw.jobs == 0 {
        return Err(err("jobs", "must be at least 1".into()));
    }
    if raw.compiles == 0 {
        return Err(err("compiles", "must be at least 1".into()));
    }
    if !(raw.compile_ms > 0.0 && raw.compile_ms <= 600_000.0) {
        return Err(err(
            "compile_ms",
            format!("must be in (0, 600000], found {}", raw.compile_ms),
        ));
    }
    if !(raw.faults_per_s >= 1.0 && raw.faults_per_s <= 1e7) {
        return Err(err(
            "faults_per_s",
            format!("must be in [1, 1e7], found {}", raw.faults_per_s),
        ));
    }
    if raw.header_pages == 0 || raw.header_pages > 1 << 20 {
        return Err(err(
            "header_pages",
            format!("must be between 1 and 2^20, found {}", raw.header_pages),
        ));
    }
    let faults = (raw.faults_per_s * raw.compile_ms / 1e3).round() as u64;
    let heap_pages = faults.saturating_sub(raw.header_pages).max(1);
    let cycles = raw.compile_ms * 1e6 * cpu_ghz;
    let gap_cycles = (cycles / heap_pages as f64).min(u32::MAX as f64) as u32;
    let files = (0..raw.instances)
        .map(|i| FileSpec {
            name: format!("tree{i}"),
            pages: raw.header_pages,
            shmem: false,
        })
        .collect();
    let threads = (0..raw.instances)
        .map(|i| ThreadSpec {
            process: i,
            placement: Placement::Spread,
            stream: Box::new(Make {
                compile: Compile {
                    file: i,
                    header_pages: raw.header_pages,
                    heap_pages,
                    gap_cycles,
                    next: 0,
                    started: false,
                    done: false,
                },
                jobs: raw.jobs,
                compiles: raw.compiles,
                started: 0,
                running: 0,
                done: false,
            }),
        })
        .collect();
    Ok(Workload {
        name: format!("kbuild ({} × make -j{})", raw.instances, raw.jobs),
        work_unit: "compiles".into(),
        processes: raw.instances,
        files,
        threads,
        info: vec![
            ("instances".into(), raw.instances.to_string()),
            ("jobs".into(), raw.jobs.to_string()),
            ("compiles per build".into(), raw.compiles.to_string()),
            ("heap pages per compile".into(), heap_pages.to_string()),
        ],
        phases: vec![],
        regions: vec![],
        expected: None,
    })
}
