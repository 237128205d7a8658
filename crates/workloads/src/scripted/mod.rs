//! `type = "scripted"`: the small C micro-benchmarks kernel developers write (swap_bench,
//! swap-young.c, ...) described as a list of regions and a list of phases in TOML.
//!
//! Program shape (every thread runs the same program; phases are sequential, like C programs
//! separated by pthread barriers):
//!
//! 0. as in the C program (`c_program`), a main thread maps every region (`Op::Mmap`), starts
//!    the workers and waits for them in pthread_join (`Op::Barrier`, `Op::Join`): it is the
//!    process's first thread, so the workers are `CLONE_VM` threads to NUMA balancing
//!    (init_numa_balancing), and it counts in the process's thread count (vma_is_accessed);
//! 1. every worker emits `Op::Barrier` (the regions exist);
//! 2. for each phase instance, every *participating* worker emits `Mark(Phase(id))`, the
//!    phase's ops and `Mark(Work(n))` (n = its accesses in that phase, omitted when 0); then
//!    *every* worker emits `Op::Barrier`;
//! 3. every worker emits `Op::Exit`; then the main thread returns from the join and exits.
//!
//! Thread indices in the scenario (`threads = [0]`, `placement`) name workers; the main thread
//! is the simulator's thread 0, so worker `t` is simulator thread `t + 1`.
//!
//! The phase list runs in definition order, `loops` times. A `[[workload.loop]]` entry repeats a
//! list of phases (by name) `times` times; the group runs at the position of its earliest
//! member in the phase list, and its members are not also run on their own. Loop iterations
//! reuse the phase ids, so per-phase totals accumulate.
//!
//! Processes that come and go: a `fork` phase's participating workers (default worker 0)
//! each emit `count` × `Op::Fork` (default 1) and go on at once. `fork_child` hands out, in
//! the order of the forks, a `Stream` that runs the phases the fork's `child` list names, in
//! order, with no barriers (the child is alone in its process), then `Op::Exit`. The child
//! takes its forking worker's index for per-thread keys (`threads`, `gap_cycles` arrays): it
//! runs a listed phase only if that worker takes part in it, and its random stream is seeded
//! from the seed, the worker and the worker's child number. A phase a `child` list names is
//! the children's: the parent runs it only where a `[[workload.loop]]` lists it. A `wait`
//! phase's workers emit one `Op::Wait` per child they forked and have not waited for, and a
//! worker waits so for the rest after its last phase, before `Op::Exit`: children do not
//! outlive the workload's process (whose exit would free its memory).
//!
//! Region binding (`node` on a region) is approximated: the region is first-touched wherever the
//! kernel puts it, and after each `touch` phase of that region the lowest participating thread
//! emits `Op::MovePages` of the whole region to `node` (an mbind(MPOL_MF_MOVE) after the fact).
//!
//! Streams are generated lazily, ~1024 ops per `refill`; only a `touch` phase's random
//! permutation and a Zipf phase's CDF are precomputed (once per phase, shared by all threads).

pub mod c_program;
mod config;
mod loops;
mod phase_keys;
mod phases;
mod plan;
mod process_image;
mod regions;
mod stream;
#[cfg(test)]
mod tests;
mod uniform_draws;

use std::fmt::Display;
use std::sync::Arc;

use tierlab::config::ConfigError;
use tierlab::splitmix::splitmix64;
use tierlab::workload::{
    Expected, FileSpec, Mark, Op, OpList, Placement, RegionSpec, ThreadSpec, ThreadStream, Workload,
};

use config::PlacementCfg;
use plan::Program;
use stream::Stream;

const PAGE: u64 = 4096;

/// Error helper: "origin: key `key`: message".
struct Keyed<'a>(&'a str);
impl Keyed<'_> {
    fn at(&self, key: impl Display, msg: impl Display) -> ConfigError {
        ConfigError::key(self.0, key, msg)
    }
}

/// A seed derived from the scenario's: one stream per `salt` (what it is for) and `n` (which).
fn mix(seed: u64, salt: u64, n: u64) -> u64 {
    splitmix64(splitmix64(seed ^ salt).wrapping_add(n))
}

/// A scripted `[workload]` table typed, checked and resolved: what `build` turns into thread
/// streams and `c_program` into C.
struct Resolved {
    cfg: config::Cfg,
    phase_cfgs: Vec<phase_keys::PhaseCfg>,
    placements: Vec<Placement>,
    regions: Vec<plan::Region>,
    files: Vec<FileSpec>,
    phases: phases::Phases,
    steps: Vec<plan::Step>,
    /// The regions, then the watched sub-ranges.
    region_specs: Vec<RegionSpec>,
}

/// Type and check `table` (errors in the order `build` has always reported them).
fn resolve(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    nodes: u32,
    cpus: u32,
) -> Result<Resolved, ConfigError> {
    let (cfg, phase_cfgs) = config::parse(table, origin)?;
    let placements = config::placements(&cfg, cpus, origin)?;
    let (regions, files) = regions::lay_out(&cfg.regions, nodes, origin)?;
    let phases = phases::plan(&phase_cfgs, &regions, cfg.threads, nodes, seed, origin)?;
    let steps = loops::steps(&cfg.groups, &phases.ids, &phases.in_child, origin)?;
    let region_specs = regions::specs(&regions, &cfg.watch, origin)?;
    Ok(Resolved {
        cfg,
        phase_cfgs,
        placements,
        regions,
        files,
        phases,
        steps,
        region_specs,
    })
}

/// Build a scripted workload from the scenario's [workload] table. `origin` is the file name for
/// errors; `nodes` is the machine's node count; `cpus` its CPU count; `cpu_ghz` its clock.
pub fn build(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    nodes: u32,
    cpus: u32,
    cpu_ghz: f64,
) -> Result<Workload, ConfigError> {
    let Resolved {
        cfg,
        placements,
        regions,
        files,
        phases,
        steps,
        region_specs,
        ..
    } = resolve(table, origin, seed, nodes, cpus)?;
    let nthreads = cfg.threads;

    let placement = match &cfg.placement {
        None => "spread".to_string(),
        Some(PlacementCfg::Named(s)) => s.clone(),
        Some(PlacementCfg::Cpus(c)) => format!("CPUs {c:?}"),
    };
    let region_list: Vec<String> = regions.iter().map(regions::describe).collect();
    let info = vec![
        ("threads".to_string(), format!("{nthreads} ({placement})")),
        ("regions".to_string(), region_list.join("; ")),
        (
            "program".to_string(),
            loops::describe(&steps, &phases, cfg.loops),
        ),
    ];

    let prologue: Vec<Op> = regions
        .iter()
        .map(|r| Op::Mmap {
            addr: r.start,
            len: r.pages * PAGE,
            prot: r.prot,
            backing: r.backing,
        })
        .collect();
    let region_pages = regions.iter().map(|r| r.pages).sum();
    let image = process_image::ProcessImage::new(files.len() as u32, nthreads, region_pages);
    let mut files = files;
    files.push(image.file.clone());
    let prog = Arc::new(Program {
        prologue,
        worker_start: (0..nthreads).map(|t| image.worker_ops(t)).collect(),
        phases: phases.plans,
        steps,
        loops: cfg.loops,
    });
    let mut main_ops = image.main_ops();
    main_ops.extend_from_slice(&prog.prologue);
    main_ops.extend(image.thread_ops());
    main_ops.extend([Op::Barrier, Op::Join, Op::Exit]);
    let main = ThreadSpec {
        process: 0,
        placement: Placement::Spread,
        stream: Box::new(OpList::new(main_ops)),
    };
    let workers = placements
        .into_iter()
        .enumerate()
        .map(|(t, placement)| ThreadSpec {
            process: 0,
            placement,
            stream: Box::new(Stream::new(Arc::clone(&prog), t as u32, seed))
                as Box<dyn ThreadStream>,
        });
    let mut threads: Vec<ThreadSpec> = std::iter::once(main).chain(workers).collect();
    let mut processes = 1;
    let mut phase_names = phases.names;
    if let Some(sampler) = &cfg.sampler {
        // As the C program's sampler sets its affinity: the first CPU no worker is pinned to.
        let pinned: Vec<u32> = (threads.iter())
            .filter_map(|t| match t.placement {
                Placement::Pinned(c) => Some(c),
                Placement::Spread => None,
            })
            .collect();
        let placement = (0..cpus)
            .find(|c| !pinned.is_empty() && !pinned.contains(c))
            .map_or(Placement::Spread, Placement::Pinned);
        // Its run time is reported as a phase of its own, which `validate` matches to the
        // guest sampler's CPU time per sample.
        if phase_names.iter().any(|n| n == SAMPLER_PHASE) {
            return Err(ConfigError::key(
                origin,
                "workload.sampler",
                format!("a phase is named \"{SAMPLER_PHASE}\", the name the sampler's run time is reported under; rename the phase"),
            ));
        }
        let phase = phase_names.len() as u32;
        phase_names.push(SAMPLER_PHASE.to_string());
        threads.push(sampler_thread(sampler, placement, cpu_ghz, phase));
        processes = 2;
    }
    Ok(Workload {
        expected: Some(Expected::Accesses(prog.expected_accesses())),
        name: cfg.name.unwrap_or_else(|| "scripted".to_string()),
        work_unit: "accesses".to_string(),
        processes,
        files,
        threads,
        info,
        phases: phase_names,
        regions: region_specs,
    })
}

/// The phase the sampler's run time is reported under.
pub const SAMPLER_PHASE: &str = "sampler";

/// `[workload.sampler]`: a process of its own that, at each of its slots (`Op::PollSlot`: as
/// `validate`'s sampler waits for them, with poll(2) in whole milliseconds), runs `cpu_us` and
/// reads the workload's numa_maps at `page_ns` per entry (as it walks /proc), all of it in
/// phase `phase`.
fn sampler_thread(
    s: &config::SamplerCfg,
    placement: Placement,
    cpu_ghz: f64,
    phase: u32,
) -> ThreadSpec {
    let interval_ns = (s.interval_ms * 1e6).round() as u32;
    let cycles = (s.cpu_us * 1e3 * cpu_ghz).round() as u64;
    // Op::Compute takes u32 cycles: a long run is several.
    let mut run = Vec::new();
    let mut left = cycles;
    while left > 0 {
        let n = left.min(u32::MAX as u64);
        run.push(Op::Compute(n as u32));
        left -= n;
    }
    if s.page_ns > 0.0 {
        run.push(Op::ReadNumaMaps {
            process: 0,
            cycles_per_entry: (s.page_ns * cpu_ghz).round() as u32,
        });
    }
    let mut ops = vec![Op::Mark(Mark::Phase(phase))];
    for _ in 0..s.samples {
        ops.push(Op::PollSlot(interval_ns));
        ops.extend_from_slice(&run);
    }
    ops.push(Op::Exit);
    ThreadSpec {
        process: 1,
        placement,
        stream: Box::new(OpList::new(ops)),
    }
}
