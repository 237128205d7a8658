//! tierlab: a fast, deterministic simulator of Linux memory management on tiered-memory
//! machines.
//!
//! # The layers
//! - `machine/`: the hardware only — CPUs with their clocks, TLBs and perf counters, memory
//!   nodes with latency and bandwidth, the cost table.
//! - `arch/`: how TLBs are kept coherent (x86 today) behind the kernel's TLB API.
//! - `kernel.rs` and `mm/`: the memory manager, one file per Linux file it models; its
//!   functions take the machine they act on explicitly. `sched.rs` places and switches
//!   threads.
//! - `policy/`: memory-tiering policies (upstream Linux, TPP), chosen by name.
//! - `sim.rs`: the engine, the event loop that runs the kernel on the machine.
//! - `result.rs` and `report.rs`: the typed result and its human summary.
//!
//! # One access, forward
//! A workload thread's stream yields `Op::Load(vaddr)`. The engine runs it on the CPU the
//! scheduler placed the thread on (`Sim::access`): the L1 dTLB, then the STLB, are looked up
//! with the CPU's current ASID; a hit costs the STLB latency (if any) plus the data access.
//! A miss walks the mm's page table (`page_walk_cycles`); a present PTE sets the Accessed bit
//! (and Dirty on a store) with the hardware's assist cost and fills the TLBs; otherwise
//! `Kernel::handle_mm_fault` runs (charging the CPU) and the walk retries. The data access
//! then costs the frame's node latency divided by the machine's memory-level parallelism,
//! unless the optional cache filter hits.
//!
//! # Determinism
//! Events are ordered by (cycle, sequence number); the busy CPU with the lowest clock runs
//! next, ties to the lowest id; every random choice comes from one ChaCha8 generator seeded
//! by `scenario.seed`. The same config and seed give the same result, byte for byte, apart
//! from the wall-clock fields.

pub mod arch;
pub mod check;
pub mod config;
pub mod cost;
pub mod kernel;
pub mod machine;
pub mod mm;
pub mod net;
pub mod phases;
pub mod policy;
pub mod process;
pub mod report;
pub mod reproductions;
pub mod result;
pub mod sched;
pub mod sim;
pub mod splitmix;
pub mod stats;
pub mod workload;

pub use config::Config;
pub use result::RunResult;
pub use sim::{Ended, Sim, SimError};
pub use workload::Workload;

/// A simulation: build it from a config and a workload, run it, get its result.
pub struct Simulation {
    sim: Sim,
    /// When building began: a run's wall time includes booting the machine.
    started: std::time::Instant,
}

impl Simulation {
    /// Build the machine, boot the kernel and place the workload's threads.
    pub fn new(cfg: Config, workload: Workload) -> Result<Simulation, SimError> {
        let started = std::time::Instant::now();
        Ok(Simulation {
            sim: Sim::new(cfg, workload)?,
            started,
        })
    }

    /// Run to the end (every thread exited, or `sim.max_seconds`), calling `progress` with
    /// the fraction done now and then, and collect the result. Its wall time counts from
    /// `new`.
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<RunResult, SimError> {
        self.sim.run(progress)?;
        let wall = self.started.elapsed().as_secs_f64();
        Ok(RunResult::collect(&self.sim, wall))
    }

    /// Run as `run` does, showing `watch` the engine about once per timeline interval of
    /// simulated time; when it returns false the run stops there, and the result is what
    /// was simulated so far (`ended: interrupted`).
    pub fn run_watched(&mut self, watch: &mut sim::Watcher) -> Result<RunResult, SimError> {
        self.sim.run_watched(watch)?;
        let wall = self.started.elapsed().as_secs_f64();
        Ok(RunResult::collect(&self.sim, wall))
    }

    /// The engine, for tools and tests that look at the machine and kernel after a run.
    pub fn engine(&self) -> &Sim {
        &self.sim
    }

    /// The engine, mutably (tests that drive kernel functions directly).
    pub fn engine_mut(&mut self) -> &mut Sim {
        &mut self.sim
    }
}
