//! The `tierlab` command line: run a scenario, or benchmark the simulator itself.

mod bench;
mod compare;
mod csv_out;
mod knobs;
mod mem_report;
mod preflight;
mod report;
mod reproduce;
mod sweep;
mod validate;
mod watch;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tierlab::config::CheckLevel;
use tierlab::{Config, RunResult, Simulation};

/// The built-in default scenario (scenarios/xsbench.toml), used when `run` gets no file.
const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/xsbench.toml");

#[derive(Parser)]
#[command(
    name = "tierlab",
    version,
    about = "Simulate Linux memory management on a tiered-memory machine",
    long_about = "tierlab runs a workload on a simulated machine (CPUs with TLBs, DRAM and CXL-like \
NUMA nodes) under a model of the Linux memory manager, and reports what Linux would: perf TLB \
events, /proc/vmstat, /proc/interrupts, per-node memory, runtime and the workload's throughput. \
It checks its own invariants (no CPU uses a stale TLB entry for a reused frame)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario and print a perf-stat / vmstat style summary.
    Run(RunArgs),
    /// Run a scenario twice — as given, and with --set overrides (or a second scenario file) —
    /// and print a before/after table with changes in percent.
    Compare {
        /// The baseline scenario.
        scenario: PathBuf,
        /// A second scenario to compare against (instead of --set overrides).
        other: Option<PathBuf>,
        /// Overrides for the second run, e.g. --set kernel.migrc=on (repeatable). With a
        /// second scenario file, they apply to both runs, as --both does.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Overrides applied to both runs, e.g. --both workload.particles=50000.
        #[arg(long = "both", value_name = "KEY=VALUE")]
        both: Vec<String>,
        /// N variants instead of before/after: LABEL:KEY=VALUE;KEY=VALUE... (repeatable; the
        /// first is the baseline).
        #[arg(long = "variant", value_name = "LABEL:SETS")]
        variants: Vec<String>,
        /// Shorthand for three variants: default Linux (no demotion, no NUMA balancing),
        /// NUMA-balancing tiering (mode 2 + demotion) and TPP (tiering + WMARK_DEMOTE +
        /// active-LRU promotion).
        #[arg(long)]
        policies: bool,
        /// Write every run's result and the table as JSON (in every mode).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Run even when the size estimate is above tierlab's thresholds (see README).
        #[arg(long)]
        yes: bool,
    },
    /// Rerun a seed's experiment and print the simulated changes beside the published ones.
    ///
    /// Without a name, or with --list, list the reproductions.
    Reproduce {
        /// The reproduction to run (listed below).
        name: Option<String>,
        /// List the reproductions with their seed and what they run.
        #[arg(long)]
        list: bool,
        /// Overrides applied to every run, e.g. --set workload.particles=100000 for a shorter run.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Write one self-contained HTML page (plotly.js inlined, nothing fetched) plotting runs
    /// saved with `run --json`: residency per node and per region, promotion, demotion and
    /// hint-fault rates, TLB shootdowns per CPU as a heatmap, phase timings; with several
    /// runs, a compare table (change against the first) and the plots overlaid.
    Report {
        /// Run JSON file(s) from `tierlab run --json FILE` (or `compare --json`, counted as its
        /// runs); the first run is the baseline.
        #[arg(required = true, num_args = 1..)]
        runs: Vec<PathBuf>,
        /// The HTML file to write.
        #[arg(short, long, value_name = "OUT.html")]
        output: PathBuf,
    },
    /// Measure simulator speed (simulated accesses per wall second) on a scenario.
    Bench {
        /// Scenario (default: the built-in XSBench scenario).
        scenario: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Repetitions; the best is reported.
        #[arg(long, default_value_t = 3,
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        repeat: u32,
        /// Run even when the size estimate is above tierlab's thresholds (see README).
        #[arg(long)]
        yes: bool,
    },
    /// List every config knob: key, default, allowed range, the kernel file it mirrors, and what
    /// it does.
    Knobs {
        /// Print a Markdown table (the one in README.md).
        #[arg(long)]
        markdown: bool,
    },
    /// Run a scripted scenario on a real Linux 6.12 kernel under QEMU and in tierlab, and print
    /// them side by side: each region's DRAM share per sample and the tiering counters, with
    /// the sim/real ratio and a verdict per row (counters within 2x, residency within 15
    /// points). QEMU, busybox and Debian's 6.12 kernel are installed with apt on first use
    /// (the kernel is cached under ~/.cache/tierlab). Under TCG a guest second costs about
    /// 3.5-7.5 s of wall time (more CPUs, more time), and booting about 10-30 s: keep
    /// validation scenarios short. A first guest run with NUMA balancing and demotion off
    /// calibrates the stand-in: each random phase's run time per access, and how much slower
    /// the guest runs kernel code than the cost table (from the fill phases' page faults);
    /// the run time per access is then taken again from the compared run itself, before its
    /// first NUMA hint fault, since it varies between guest runs.
    /// Under TCG the stand-in's CPUs take turns on one core as QEMU 7.2 runs the vCPUs on
    /// one instruction clock (machine.vcpu_turns: each turn runs to the next timer deadline,
    /// or until the vCPU halts or arms the earliest timer, which passes the turn on). The
    /// real counters move a little between identical runs, more with --trace (the probes
    /// move every deadline) and between seeds: use --seeds for a spread. --json also records
    /// the stand-in's --set list, to rerun it with `run`.
    Validate {
        /// Scripted scenario TOML file(s). With several (e.g. scenarios/validate/*.toml), each
        /// is validated in turn and a Markdown table with one column per scenario follows.
        #[arg(required = true, num_args = 1..)]
        scenarios: Vec<PathBuf>,
        /// The arguments are files that `validate --json` wrote: rerun only the simulated side
        /// of each recorded seed (its stand-in `--set`s, then this command's) and compare it
        /// with the recorded guest samples. Seconds instead of guest boots: for judging a model
        /// change or a knob against the same real runs.
        #[arg(long, conflicts_with_all = ["kvm", "kernel", "timeout", "start_jitter",
              "scan_trace", "trace", "trace_out"])]
        replay: bool,
        /// With --replay: first search each random phase's gap (one for all its readers) again
        /// against the recorded guest's quiet window, as `validate` does after its compared
        /// run, on the stand-in as it is now (a model change that moves the readers' run time
        /// per access moves the gap).
        #[arg(long, requires = "replay")]
        refit: bool,
        /// Override any config key, as for `run` (applies to both sides).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Use KVM instead of TCG with an instruction clock (-icount) where hardware KVM works.
        #[arg(long)]
        kvm: bool,
        /// Boot this kernel image (bzImage) instead of Debian's 6.12.
        #[arg(long, value_name = "PATH")]
        kernel: Option<PathBuf>,
        /// Kill the guest after this many wall seconds (default: from the simulated length).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Write the real samples (with the guest's per-zone free pages and watermarks, and in
        /// the last sample reclaim's totals since boot: pageoutrun, pgrefill, pgactivate,
        /// kswapd_*_wmark_hit_quickly and more), the simulated result and the comparison as
        /// JSON; with --seeds N > 1, every seed's and the summary. With --replay (one file):
        /// the file again with the new stand-ins, simulated runs and comparisons, which
        /// --replay takes in turn.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Run N workload seeds (the scenario's seed s, then s+1, ..., s+N-1) on both sides
        /// and judge on the means: per counter the real and simulated mean, their min-max and
        /// the ratio of the means; per sample the gap of the mean DRAM shares and the worst
        /// gap of one seed. Costs one guest boot per seed (about 1 min wall each under TCG,
        /// more while another QEMU runs) plus the one calibration boot.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=1000))]
        seeds: u32,
        /// Also move where the program starts against the guest's 4 ms ticks, which the
        /// workload seed does not: seed i of N starts i/N of a tick later on both sides (the
        /// guest's /init sleeps that long before the program; the stand-in's jiffy boundaries,
        /// machine.tick_offset_ns, move by as much). Outcomes that turn on where a tick lands
        /// (a scan queued in a page fault or not) then show their spread. Needs --seeds 2 or
        /// more.
        #[arg(long)]
        start_jitter: bool,
        /// Trace the NUMA scanner on both sides (kprobes on task_numa_work and
        /// change_prot_numa and the sched_skip_vma_numa tracepoint in the guest, the same
        /// events in tierlab) and print every scan pass: when, which thread, how long, the
        /// PTEs each region had made PROT_NONE, the regions skipped and why.
        #[arg(long)]
        scan_trace: bool,
        /// Trace this in the guest's compared run (repeatable): a tracepoint SUBSYSTEM/EVENT
        /// (vmscan/mm_vmscan_kswapd_wake), with a filter ('sched/sched_switch if prev_comm ==
        /// "kswapd0"') or as a trigger only ('vmscan/mm_vmscan_kswapd_wake trigger
        /// enable_event:sched:sched_switch:1'), or a kprobe as kprobe_events takes it
        /// ('r:tl/prep migrate_misplaced_folio_prepare rc=$retval:s32'). The ring buffers (4 MiB
        /// per CPU) come out of the guest's memory, and the stand-in holds them too. Needs
        /// --trace-out.
        #[arg(long, value_name = "SPEC", requires = "trace_out")]
        trace: Vec<String>,
        /// Write the guest's raw ftrace (trace_clock mono) to FILE; one scenario only.
        #[arg(long, value_name = "FILE")]
        trace_out: Option<PathBuf>,
        /// Size of each CPU's ring buffer for --trace and --scan-trace, KiB (64 to 65536). A
        /// full buffer drops its oldest events; larger buffers keep more, and take the guest's
        /// memory (the stand-in holds them too).
        #[arg(long, value_name = "KIB", default_value_t = 4096,
              value_parser = clap::value_parser!(u32).range(64..=65536))]
        trace_buffer_kib: u32,
    },
    /// Run the cartesian product of knob values and seeds over scenarios (a GRID.toml) on all
    /// cores or on Ray, and write one row per run as Parquet and CSV.
    Sweep(sweep::SweepArgs),
}

fn load(scenario: Option<&Path>, sets: &[String]) -> Result<(Config, String), String> {
    let (cfg, origin) = match scenario {
        Some(p) => Config::load(p, sets)
            .map(|c| (c, p.display().to_string()))
            .map_err(|e| e.to_string())?,
        None => {
            let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
            Config::from_str_with(DEFAULT_SCENARIO, "built-in xsbench.toml", Some(&base), sets)
                .map(|c| (c, "built-in xsbench.toml".to_string()))
                .map_err(|e| e.to_string())?
        }
    };
    // Plan the workload now (streams are lazy, so this is cheap) so that a `[workload]`
    // error a `--set` caused is blamed on that `--set`, not on the file.
    workloads::build(&cfg, &origin).map_err(|e| tierlab::config::blame_set(e, sets).to_string())?;
    Ok((cfg, origin))
}

/// `load`, then refuse a run the host cannot hold or (without `yes`) a very large one.
fn load_checked(
    scenario: Option<&Path>,
    sets: &[String],
    yes: bool,
) -> Result<(Config, String), String> {
    let (cfg, origin) = load(scenario, sets)?;
    preflight::check(&cfg, &origin, sets, yes)?;
    Ok((cfg, origin))
}

/// Run with a watcher: progress, interval lines, and Ctrl-C stopping the run cleanly.
fn simulate_watched(
    cfg: Config,
    origin: &str,
    watcher: &mut watch::Watch,
) -> Result<RunResult, String> {
    let min_free = cfg.vm.min_free_kbytes;
    let workload = workloads::build(&cfg, origin).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(cfg, workload).map_err(|e| format!("{origin}: {e}"))?;
    let result = sim.run_watched(&mut |s, now| watcher.look(s, now));
    watcher.print_samples(sim.engine());
    watcher.finish();
    result.map_err(|e| {
        let mut msg = format!("{origin}: simulation stopped: {e}");
        // A large reserve is the usual cause of an OOM a config alone brings about.
        if min_free > 0 && msg.contains("out of memory") {
            msg += &format!(
                " (vm.min_free_kbytes = {min_free} holds that much back as the min watermark)"
            );
        }
        msg
    })
}

/// `tierlab run`'s arguments.
#[derive(clap::Args)]
struct RunArgs {
    /// Scenario TOML file (default: the built-in scenarios/xsbench.toml).
    scenario: Option<PathBuf>,
    /// Override any config key, e.g. --set vm.watermark_scale_factor=200 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Write the full result as JSON to this file (created before the run starts, so a
    /// bad path fails at once).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the timeline, phases, per-CPU and per-node tables as CSV files into DIR
    /// (timeline.csv, phases.csv, cpus.csv, nodes.csv).
    #[arg(long, value_name = "DIR")]
    csv: Option<PathBuf>,
    /// Print a line every MS milliseconds of simulated time while the run goes, like
    /// `vmstat 1` or `perf stat -I MS` (see --interval-style). Sets the timeline's
    /// interval (sim.timeline_interval_ms) to MS: no simulated event changes, only what is
    /// sampled (the timeline, pcp_pages_mean, how many periodic checks run).
    #[arg(long, value_name = "MS")]
    interval: Option<f64>,
    /// How --interval prints: `vmstat` (a row per interval: free and anon MiB per node,
    /// then rates per second) or `perf` (per event, the count in each interval).
    #[arg(long, value_enum, default_value_t = watch::IntervalStyle::Vmstat)]
    interval_style: watch::IntervalStyle,
    /// Print only errors (no summary, no progress bar).
    #[arg(long, short)]
    quiet: bool,
    /// Run even when the size estimate is above tierlab's thresholds (see README).
    #[arg(long)]
    yes: bool,
}

fn run(args: RunArgs) -> Result<(), String> {
    let scenario = args.scenario;
    let mut sets = args.sets;
    if let Some(ms) = args.interval {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(format!(
                "--interval {ms}: must be a positive number of milliseconds"
            ));
        }
        sets.push(format!("sim.timeline_interval_ms={ms}"));
    }
    let (cfg, origin) = load_checked(scenario.as_deref(), &sets, args.yes).map_err(|e| {
        match args.interval {
            // The key the user did not write: say which option set it.
            Some(ms) if e.contains("sim.timeline_interval_ms=") => {
                format!("--interval {ms} sets sim.timeline_interval_ms, and {e}")
            }
            _ => e,
        }
    })?;
    // Outputs are opened before the run, so a bad path fails before any simulating.
    let json_file = match &args.json {
        Some(path) => Some(
            std::fs::File::create(path).map_err(|e| format!("--json {}: {e}", path.display()))?,
        ),
        None => None,
    };
    if let Some(dir) = &args.csv {
        csv_out::prepare(dir)?;
    }
    watch::catch_ctrl_c();
    let interval = args.interval.map(|_| args.interval_style);
    let mut watcher = watch::Watch::new(args.quiet, interval);
    let result = simulate_watched(cfg, &origin, &mut watcher)?;
    if !args.quiet {
        print!("{}", result.summary_text());
    }
    let doc = (json_file.is_some() || args.csv.is_some()).then(|| result.to_json());
    if let (Some(mut file), Some(path), Some(doc)) = (json_file, &args.json, &doc) {
        use std::io::Write;
        let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
        writeln!(file, "{text}").map_err(|e| format!("--json {}: {e}", path.display()))?;
    }
    if let (Some(dir), Some(doc)) = (&args.csv, &doc) {
        let files = csv_out::write(dir, doc)?;
        if !args.quiet {
            eprintln!(
                "tierlab: wrote {} CSV files to {}",
                files.len(),
                dir.display()
            );
        }
    }
    if result.ended == tierlab::Ended::Interrupted {
        return Err(format!(
            "interrupted at {:.3} s of simulated time; the results written cover that much",
            result.sim_seconds
        ));
    }
    if result.check.violations > 0 {
        return Err(format!(
            "{} invariant violation(s); first: {}",
            result.check.violations,
            result
                .check
                .details
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default()
        ));
    }
    Ok(())
}

fn bench(
    scenario: Option<PathBuf>,
    mut sets: Vec<String>,
    repeat: u32,
    yes: bool,
) -> Result<(), String> {
    sets.push("sim.check=\"off\"".into());
    let mut best = 0.0f64;
    let (mut rates, mut reference) = (Vec::new(), bench::Timings::default());
    for i in 0..repeat.max(1) {
        let (cfg, origin) = load_checked(scenario.as_deref(), &sets, yes)?;
        debug_assert_eq!(cfg.sim.check_level(), CheckLevel::Off);
        reference.prepare(&cfg, &origin)?;
        let (result, startup) = mem_report::simulate_timed(cfg, &origin)?;
        let (acc, wall) = (result.accesses, result.wall_seconds);
        let frames: u64 = result.nodes.iter().map(|n| n.capacity_pages).sum();
        let rate = acc as f64 / wall;
        best = best.max(rate);
        rates.push(rate);
        println!(
            "run {}: {} accesses in {:.3} s wall = {:.1} M accesses/s ({} frames, {} B per frame)",
            i + 1,
            acc,
            wall,
            rate / 1e6,
            frames,
            result.frame_bytes
        );
        println!("{}", mem_report::line(startup));
        // Alternating with the runs, so both see the same load on a shared machine.
        reference.time(i + 1, &result);
    }
    println!(
        "best: {:.1} M simulated accesses per wall second",
        best / 1e6
    );
    reference.report(&rates);
    Ok(())
}

fn compare_cmd(
    scenario: PathBuf,
    other: Option<PathBuf>,
    sets: Vec<String>,
    both: Vec<String>,
    json: Option<PathBuf>,
    yes: bool,
) -> Result<(), String> {
    let json_file = create_output(json.as_deref())?;
    let (before, origin, after, after_origin) = match &other {
        // Two files: --set and --both apply to both sides.
        Some(o) => {
            let all: Vec<String> = both.iter().chain(sets.iter()).cloned().collect();
            let (b, origin) = load_checked(Some(&scenario), &all, yes)?;
            let (a, after_origin) = load_checked(Some(o), &all, yes)?;
            (b, origin, a, after_origin)
        }
        None => {
            if sets.is_empty() {
                return Err(
                    "compare: give a second scenario file or --set overrides for the second run"
                        .into(),
                );
            }
            let (b, origin) = load(Some(&scenario), &both)?;
            let all: Vec<String> = both.iter().chain(sets.iter()).cloned().collect();
            let (a, after_origin) = load_checked(Some(&scenario), &all, yes)?;
            (b, origin, a, after_origin)
        }
    };
    warn_if_same(&[("before", &before), ("after", &after)]);
    let results = compare::run_all(
        vec![
            compare::Variant {
                label: "before".into(),
                cfg: before,
                origin,
            },
            compare::Variant {
                label: "after".into(),
                cfg: after,
                origin: after_origin,
            },
        ],
        false,
    )?;
    if other.is_none() {
        println!("after = before with {}", sets.join(" "));
    }
    let table = compare::table(&results);
    print!("{table}");
    if let (Some(file), Some(path)) = (json_file, &json) {
        let doc = serde_json::json!({
            "before": results[0].1.to_json(),
            "after": results[1].1.to_json(),
            "table": compare::table_json(&results),
        });
        write_json(file, path, &doc)?;
    }
    Ok(())
}

/// Create an output file before any run starts, so a bad path fails at once.
fn create_output(path: Option<&Path>) -> Result<Option<std::fs::File>, String> {
    path.map(|p| std::fs::File::create(p).map_err(|e| format!("--json {}: {e}", p.display())))
        .transpose()
}

fn write_json(mut file: std::fs::File, path: &Path, doc: &serde_json::Value) -> Result<(), String> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    writeln!(file, "{text}").map_err(|e| format!("--json {}: {e}", path.display()))
}

/// Warn when two sides of a comparison would simulate the same thing (names aside).
fn warn_if_same(sides: &[(&str, &Config)]) {
    let key = |c: &Config| {
        let mut v = serde_json::to_value(c).unwrap_or_default();
        if let Some(s) = v.get_mut("scenario").and_then(|s| s.as_object_mut()) {
            s.remove("name");
            s.remove("description");
        }
        v
    };
    let keys: Vec<serde_json::Value> = sides.iter().map(|(_, c)| key(c)).collect();
    for i in 0..sides.len() {
        for j in i + 1..sides.len() {
            if keys[i] == keys[j] {
                eprintln!(
                    "tierlab: warning: '{}' and '{}' have the same configuration: their results will be the same",
                    sides[i].0, sides[j].0
                );
            }
        }
    }
}

/// Default Linux (no tiering), then every registered tiering policy under NUMA balancing
/// mode 2 with demotion on, as `--variant` strings; upstream's policy is labelled "tiering".
fn policy_variants() -> Vec<String> {
    let mut v = vec!["linux:kernel.numa_balancing=0;vm.demotion_enabled=false".to_string()];
    for p in tierlab::policy::POLICIES {
        let label = if p.name == "linux" { "tiering" } else { p.name };
        v.push(format!(
            "{label}:kernel.numa_balancing=2;vm.demotion_enabled=true;kernel.tiering_policy={}",
            p.name
        ));
    }
    v
}

fn parse_variant(spec: &str) -> Result<(String, Vec<String>), String> {
    let (label, sets) = spec
        .split_once(':')
        .ok_or_else(|| format!("--variant {spec}: expected LABEL:KEY=VALUE;KEY=VALUE"))?;
    let sets = sets
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    Ok((label.to_string(), sets))
}

/// `validate` over one or more scenarios; with several, the suite table at the end.
fn validate_cmd(
    scenarios: Vec<PathBuf>,
    mut args: validate::command::ValidateArgs,
) -> Result<(), String> {
    if scenarios.len() > 1 && args.json.is_some() {
        return Err("validate: --json takes one scenario (run the others one at a time)".into());
    }
    if scenarios.len() > 1 && args.trace_out.is_some() {
        return Err(
            "validate: --trace-out takes one scenario (run the others one at a time)".into(),
        );
    }
    each_then_suite(&scenarios, |scenario| {
        args.scenario = scenario.to_path_buf();
        validate::command::run(&args)
    })
}

/// `validate --replay`: the recorded guest runs beside the simulator as it is now.
fn replay_cmd(
    files: &[PathBuf],
    sets: &[String],
    seeds: u32,
    refit: bool,
    json: Option<&Path>,
) -> Result<(), String> {
    if seeds != 1 {
        return Err("validate --replay: the seeds are the recorded ones (drop --seeds)".into());
    }
    if let Some(out) = json {
        if files.len() > 1 {
            return Err(
                "validate --replay: --json takes one file (replay the others one at a time)".into(),
            );
        }
        // A path that cannot be written fails now, not after the runs (opened to append, so
        // that the file replayed can also be the one written).
        (std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(out))
        .map_err(|e| format!("--json {}: {e}", out.display()))?;
    }
    each_then_suite(files, |file| validate::replay::run(file, sets, refit, json))
}

/// Validate each of `paths` in turn and, with several, print the suite table after them.
fn each_then_suite(
    paths: &[PathBuf],
    mut one: impl FnMut(&Path) -> Result<validate::suite::Column, String>,
) -> Result<(), String> {
    let mut cols = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        if paths.len() > 1 {
            eprintln!("tierlab: {} of {}: {}", i + 1, paths.len(), path.display());
        }
        cols.push(one(path)?);
        if paths.len() > 1 {
            println!();
        }
    }
    if cols.len() > 1 {
        println!("suite (real / simulated):\n");
        print!("{}", validate::suite::markdown(&cols));
    }
    Ok(())
}

fn variants_cmd(
    scenario: PathBuf,
    both: Vec<String>,
    specs: Vec<String>,
    json: Option<PathBuf>,
    yes: bool,
) -> Result<(), String> {
    let json_file = create_output(json.as_deref())?;
    let mut variants = Vec::new();
    for spec in &specs {
        let (label, sets) = parse_variant(spec)?;
        let all: Vec<String> = both.iter().chain(sets.iter()).cloned().collect();
        let (cfg, origin) = load_checked(Some(&scenario), &all, yes)?;
        println!("{label}: {}", sets.join(" "));
        variants.push(compare::Variant { label, cfg, origin });
    }
    let sides: Vec<(&str, &Config)> = variants
        .iter()
        .map(|v| (v.label.as_str(), &v.cfg))
        .collect();
    warn_if_same(&sides);
    let results = compare::run_all(variants, false)?;
    print!("{}", compare::table(&results));
    if let (Some(file), Some(path)) = (json_file, &json) {
        let runs: Vec<serde_json::Value> = results
            .iter()
            .map(|(label, r)| serde_json::json!({"label": label, "result": r.to_json()}))
            .collect();
        let doc = serde_json::json!({"variants": runs, "table": compare::table_json(&results)});
        write_json(file, path, &doc)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    // The reproductions' names come from the library's table, so `reproduce --help` lists them.
    let after = format!("Reproductions:\n{}", reproduce::listing());
    let cmd = Cli::command().mut_subcommand("reproduce", |c| c.after_help(after));
    let cli = match Cli::from_arg_matches(&cmd.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let r = match cli.command {
        Command::Run(args) => run(args),
        Command::Bench {
            scenario,
            sets,
            repeat,
            yes,
        } => bench(scenario, sets, repeat, yes),
        Command::Compare {
            scenario,
            other,
            sets,
            both,
            variants,
            policies,
            json,
            yes,
        } => {
            if policies || !variants.is_empty() {
                // Variants carry their own overrides: a second file or --set has no side to
                // go to.
                if let Some(o) = &other {
                    Err(format!(
                        "compare: a second scenario ({}) cannot be combined with --variant or --policies",
                        o.display()
                    ))
                } else if !sets.is_empty() {
                    Err("compare: --set names the second run's overrides; with --variant or --policies put them in each variant, or use --both for all".into())
                } else {
                    let mut v = variants;
                    if policies {
                        v.extend(policy_variants());
                    }
                    variants_cmd(scenario, both, v, json, yes)
                }
            } else {
                compare_cmd(scenario, other, sets, both, json, yes)
            }
        }
        Command::Reproduce { name, list, sets } => match name {
            Some(name) if !list => reproduce::run(&name, &sets),
            _ => {
                print!("{}", reproduce::listing());
                Ok(())
            }
        },
        Command::Knobs { markdown } => knobs::run(markdown),
        Command::Sweep(args) => sweep::run(args),
        Command::Report { runs, output } => report::run(&runs, &output),
        Command::Validate {
            scenarios,
            replay: true,
            refit,
            sets,
            seeds,
            json,
            ..
        } => replay_cmd(&scenarios, &sets, seeds, refit, json.as_deref()),
        Command::Validate {
            scenarios,
            replay: _,
            refit: _,
            sets,
            kvm,
            kernel,
            timeout,
            json,
            seeds,
            start_jitter,
            scan_trace,
            trace,
            trace_out,
            trace_buffer_kib,
        } => validate_cmd(
            scenarios,
            validate::command::ValidateArgs {
                scenario: PathBuf::new(),
                sets,
                accel: if kvm {
                    validate::guest::Accel::Kvm
                } else {
                    validate::guest::Accel::Tcg
                },
                kernel,
                json,
                timeout_s: timeout,
                seeds,
                start_jitter,
                scan_trace,
                trace,
                trace_out,
                trace_buffer_kib,
            },
        ),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tierlab: {e}");
            // 128 + SIGINT, as a shell reports a command Ctrl-C stopped.
            if watch::interrupted() {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
