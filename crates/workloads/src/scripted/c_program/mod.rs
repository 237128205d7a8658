//! A scripted workload as a self-contained C program, to run the same scenario on a real Linux
//! kernel (under QEMU, by `tierlab validate`) and compare what the kernel did with the
//! simulator.
//!
//! `generate` resolves the `[workload]` table with the same code as [`super::build`] (same
//! errors, same region addresses, same phase plans) and emits C11 that needs only libc and
//! pthreads (`cc -O2 -static -pthread prog.c`; no libnuma, no libm). The generated file is
//! the scenario's tables (regions, phases, loop steps, threads) followed by a fixed runtime
//! (`runtime.c`) that interprets them:
//!
//! - main first re-executes itself once with `ADDR_NO_RANDOMIZE` (best effort): a static
//!   glibc program calls `sbrk` before `main`, and recent x86-64 kernels start the brk heap
//!   anywhere in the GiB above the program (a 6.18 kernel put it at 0x2aad3000), where the
//!   simulator's regions are (0x10000000 on);
//! - it maps every region at the simulator's address (`MAP_FIXED_NOREPLACE`; `MAP_FIXED` if the
//!   kernel refuses the flag; a kernel that takes it as a hint and maps elsewhere is an EEXIST)
//!   with the region's prot. A file region is a file of the region's size created (sparse) in
//!   `$TIERLAB_FILE_DIR` (default `/tmp`), unlinked at once and mapped `MAP_SHARED`; a shmem
//!   region is a memfd of its size (`memfd_create`), mapped `MAP_SHARED`;
//! - one pthread per workload thread, pinned with `sched_setaffinity` when the placement pins
//!   it (spread threads are left to the scheduler); the threads run the steps (loop groups
//!   included) `loops` times, each phase instance followed by a `pthread_barrier_wait`, as the
//!   simulator's op stream does;
//! - a sampler *process*, forked before the regions exist (so it shares none of them, and its
//!   work is not the workload's run time, which paces NUMA balancing's scanner), runs pinned
//!   to the first CPU no workload thread is pinned to, when any is left, and prints a sample
//!   of the workload's pages every `sample_interval_ms`, and one more after the last phase. After a sample the sampler idles
//!   at least as long as the sample took: it never uses more than half a CPU, and the
//!   effective interval grows. Under TCG with `-icount` every guest instruction slows every
//!   vCPU, so the sample is kept cheap: one read of `/proc/PID/numa_maps` (a page-table walk,
//!   2–35 ms on the validation machines) where per-page `move_pages` took 110–240 ms.
//!
//! # Output: JSON lines on stdout
//!
//! Every line is one JSON object, flushed as it is written; lines never interleave.
//!
//! - Sample: `{"t_ms":12.345,"regions":{"buf":[1024,0],"hot tail":[256,0]},
//!   "vmstat":{"pgmigrate_success":0,"numa_hint_faults":null},"tlb":[365129,370703],
//!   "accesses":[1024,0],"schedstat":[[812000,3000],[0,0]],"zones":[..],"span_ms":0.412,
//!   "cpu_ms":0.398,"sampler_cpu":2}`
//!   - `t_ms`: ms since the program started (CLOCK_MONOTONIC) when the sample began; `span_ms`:
//!     how long it took (the residency is not an instant snapshot), `cpu_ms` how much of the
//!     sampler's CPU time, `sampler_cpu` the CPU it ended on;
//!   - `regions`: per region, then per `[[workload.watch]]` sub-range (under its name, as the
//!     simulator's timeline does), the number of resident pages on node 0, 1, ... The array has
//!     `CProgramOptions::nodes` entries, more if the kernel puts pages on a higher node.
//!     Residency is the `N<node>=<pages>` fields of `/proc/PID/numa_maps`, summed over the
//!     VMAs that start inside the region (mapped pages: not those never touched, unmapped,
//!     swapped out, or the shared zero page of an anon page only read). With watched
//!     sub-ranges, or `TIERLAB_RESIDENCY=move_pages`, it is `move_pages(pid, n, pages, NULL,
//!     status, 0)` page by page in chunks of 4096 (status ≥ 0 is the node);
//!   - `vmstat`: each requested `/proc/vmstat` counter, `null` if the kernel has no such
//!     counter;
//!   - `tlb`: the `TLB:` row of `/proc/interrupts` (TLB shootdowns received, one number per
//!     CPU); `[]` where the row does not exist (not x86).
//!   - `accesses`: each worker's accesses so far, as it published them at its last pacing
//!     batch or phase end (a page of shared memory mapped before the sampler's fork), so
//!     the readers' rate can be followed through a burst; `schedstat`: each worker's
//!     `[run, run-queue wait]` so far in ns from `/proc/PID/task/TID/schedstat` (`[0,0]`
//!     before it starts and after it exits).
//!   - `zones`: per node and populated zone of `/proc/zoneinfo`, `{"node":0,"zone":"DMA32",
//!     "free":..,"min":..,"low":..,"high":..,"promo":..,"managed":..,"pcp":..,"pcp_high":..,
//!     "protection":[..]}` (pages; `pcp` is the pages on the per-CPU lists, not in `free`, and
//!     `pcp_high` their `high` limits, both summed over CPUs;
//!     a line the kernel does not print is `null`; `protection` is `lowmem_reserve`); `null`
//!     when the file cannot be read. Zoneinfo is read at the first and last sample only (the
//!     kernel prints it under each zone's lock with interrupts off, which perturbed the guest);
//!     between them `free` comes from `/proc/buddyinfo`, `pcp` and `pcp_high` are `null` and
//!     the rest is the last read's.
//!     `TIERLAB_ZONEINFO=FILE` and `TIERLAB_BUDDYINFO=FILE` read FILE instead.
//!   - `node_meminfo` (only with `CProgramOptions::node_meminfo`):
//!     `{"AnonHugePages":[2048,0]}`, each field in kB per node from
//!     `/sys/devices/system/node/nodeN/meminfo` (one read per node and sample; `null` where
//!     unreadable). `TIERLAB_NODE_DIR=DIR` reads `DIR/nodeN/meminfo` instead.
//! - Phase instance ended (printed by the thread the barrier elects, after the barrier, in
//!   program order): `{"phase":"fill","begin_ms":0.512,"end_ms":40.125,"accesses":1024,
//!   "cpu_ms":12.5}`; `cpu_ms` is the CPU time (user + system, the kernel's
//!   `sum_exec_runtime`) all threads spent in the instance.
//!   `begin_ms` is when the previous barrier released the threads (so it equals the previous
//!   line's `end_ms`); `accesses` is the loads and stores all threads made in the instance. A
//!   loop prints one line per iteration.
//! - Phase run by a forked child (printed by the child as the phase ends):
//!   `{"child_phase":"child writes","thread":0,"child":0,"begin_ms":40.2,"end_ms":41.0,
//!   "accesses":512,"cpu_ms":0.7}`; `thread` is the worker that forked it, `child` that
//!   worker's count of children before it. Not a `phase` line: children run beside the
//!   workers' phases, not between their barriers.
//! - `{"warning":"..."}`: at most once. When `move_pages` fails with ENOSYS, EINVAL or EPERM
//!   (no NUMA, or not allowed), residency comes from the workload's `/proc/PID/pagemap`
//!   (present bit) with every present page on node 0, and `move_pages` phases (and region
//!   binding) do nothing; ENODEV (the target node does not exist) also only warns.
//!   `TIERLAB_RESIDENCY=mincore` forces that path (the name is historical).
//!   Without NUMA, numa_maps does not exist and the sampler takes the same path.
//! - `{"error":"..."}`: a failing syscall (or SIGSEGV / SIGBUS: an access to a page the phases
//!   unmapped or protected); the program exits 1 right after it.
//! - `{"done":true,"t_ms":1234.5}`: the last line; the program exits 0.
//!
//! # Per phase kind
//!
//! - `touch`, `stride`, `random`: one-byte loads or stores (`volatile`) at the simulator's
//!   addresses: page starts for touch (sequential, reverse, or a random order: a Fisher-Yates
//!   shuffle, not the simulator's), every `stride_bytes` for stride; uniform or Zipf pages with
//!   an 8-byte-aligned offset for random (the same CDF as the simulator's, ranks from the hot
//!   end). Random numbers are SplitMix64 seeded from the seed and the thread index (a forked
//!   child's from the seed, its worker and its number): the same program and seed give the
//!   same addresses, not the simulator's addresses.
//!   - `rate_per_s`: slot k of a thread's phase is at start + k / rate; the thread sleeps
//!     (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`) before every batch of slots, batches
//!     being at least 50 µs long. The schedule starts at each phase instance.
//!   - `duration_ms`: the phase stops on the clock (CLOCK_MONOTONIC) rather than after
//!     duration × rate accesses.
//!   - `gap_cycles`: a spin of that many empty loop iterations (about a cycle each), one count
//!     for every thread or one per thread (a `GAP_<i>` table either way).
//!   - Region binding (`node` on a region): after each touch of it, the lowest participating
//!     thread moves the whole region there with `move_pages`, as the simulator does.
//! - `madvise` (`MADV_PAGEOUT`, `MADV_COLD`, `MADV_DONTNEED`, `MADV_HUGEPAGE`,
//!   `MADV_NOHUGEPAGE`: tierlab's advice numbers are Linux's, passed as they are), `mprotect`,
//!   `munmap`, `mmap` (anon, or the file from the range's page offset): the syscall on the
//!   phase's range, by each participating thread. Regions are 2 MiB aligned at the same
//!   addresses on both sides, so a THP covers the same pages in both.
//! - `move_pages`: `move_pages(MPOL_MF_MOVE)` of every page, 4096 pages per call; per-page
//!   failures (page absent, busy) are not errors.
//! - `sleep`: `clock_nanosleep` for `ms`; `barrier`: nothing but the barrier.
//! - `fork`: each participating worker calls fork(2) `count` times and goes on at once. A
//!   child (the calling thread alone, with a copy-on-write copy of the regions) closes its
//!   copy of the sampler's stop pipe, takes back main's CPU set if its worker was pinned (the
//!   simulator puts a child on the idlest CPU), runs its `child` phases with the worker's
//!   index and no barriers, prints a `child_phase` line for each, and calls `_exit(0)`. It
//!   publishes no access counts and takes no samples: the sampler samples the workload's
//!   process only.
//! - `wait`: `waitpid` for each child the worker forked and has not waited for. A worker
//!   waits so for the rest after its last phase, as the simulator's does. A child that did
//!   not exit 0 is an error of the program.

mod phases;
mod sampler;

use std::fmt::Write;

use tierlab::config::ConfigError;
use tierlab::workload::{Backing, Placement};

use super::{loops, resolve, Resolved, PAGE};

/// The runtime every generated program ends with.
const RUNTIME: &str = include_str!("runtime.c");

/// What the generated program reports and the machine it is generated for.
#[derive(Clone, Debug)]
pub struct CProgramOptions {
    /// Interval between residency samples (ms of wall-clock time).
    pub sample_interval_ms: f64,
    /// `/proc/vmstat` counters each sample reports.
    pub counters: Vec<String>,
    /// More counters the last sample reports (their totals since boot): every byte of a
    /// sample line is the guest's work, so counters wanted only as totals stay out of the rest.
    pub end_counters: Vec<String>,
    /// `/sys/devices/system/node/nodeN/meminfo` fields (kB) each sample reports per node
    /// (`AnonHugePages`); empty: the files are not read, and the program is the same binary
    /// as before the option existed.
    pub node_meminfo: Vec<String>,
    /// The machine's NUMA node count (as `scripted::build` takes it).
    pub nodes: u32,
    /// The machine's CPU count (as `scripted::build` takes it).
    pub cpus: u32,
}

/// The C source of the program that runs the scripted workload `table` (the scenario's
/// `[workload]`) on a real kernel. `origin` names the file in errors; `seed` is the scenario's.
/// Errors are those of `scripted::build` for the same table, plus bad options.
pub fn generate(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    opts: &CProgramOptions,
) -> Result<String, ConfigError> {
    if !(opts.sample_interval_ms > 0.0 && opts.sample_interval_ms.is_finite()) {
        return Err(ConfigError::msg(format!(
            "C program: sample_interval_ms must be > 0, got {}",
            opts.sample_interval_ms
        )));
    }
    for c in opts.counters.iter().chain(&opts.end_counters) {
        if c.is_empty() || c.contains(|ch: char| ch.is_whitespace() || ch.is_control()) {
            return Err(ConfigError::msg(format!(
                "C program: {c:?} is not a /proc/vmstat counter name"
            )));
        }
    }
    for f in &opts.node_meminfo {
        if f.is_empty() || f.contains(|ch: char| ch.is_whitespace() || ch.is_control() || ch == ':')
        {
            return Err(ConfigError::msg(format!(
                "C program: {f:?} is not a node meminfo field name"
            )));
        }
    }
    let r = resolve(table, origin, seed, opts.nodes, opts.cpus)?;
    let mut out = String::new();
    header(&mut out, &r, origin, seed);
    if !opts.node_meminfo.is_empty() {
        // The runtime's node meminfo reader exists only then (runtime.c).
        out.push_str("#define TIERLAB_NODE_MEMINFO 1\n");
    }
    out.push_str(RUNTIME);
    out.push_str("\n/* ---- the scenario ---- */\n\n");
    threads(&mut out, &r, seed);
    regions(&mut out, &r);
    sampler::tables(&mut out, &r, opts);
    phases::tables(&mut out, &r, seed)?;
    Ok(out)
}

/// The comment at the top: where the program comes from and what it runs.
fn header(out: &mut String, r: &Resolved, origin: &str, seed: u64) {
    let program = loops::describe(&r.steps, &r.phases, r.cfg.loops);
    let _ = writeln!(
        out,
        "/*\n * Generated by tierlab from {} (seed {seed}): do not edit.\n * Program: {}\n * Build: cc -O2 -static -pthread prog.c\n */",
        comment(origin),
        comment(&program)
    );
}

/// Thread count, placement and the seed.
fn threads(out: &mut String, r: &Resolved, seed: u64) {
    let cpus: Vec<String> = r
        .placements
        .iter()
        .map(|p| match p {
            Placement::Pinned(c) => c.to_string(),
            Placement::Spread => "-1".to_string(),
        })
        .collect();
    let _ = writeln!(out, "const int NTHREADS = {};", r.cfg.threads);
    let _ = writeln!(out, "const int PLACEMENT[] = {{{}}};", cpus.join(", "));
    let _ = writeln!(out, "const uint64_t SEED = {seed}ULL;");
    let _ = writeln!(out, "const uint64_t LOOPS = {}ULL;\n", r.cfg.loops);
}

/// The regions, mapped by main in definition order.
fn regions(out: &mut String, r: &Resolved) {
    let rows: Vec<String> = r
        .regions
        .iter()
        .map(|g| {
            format!(
                "\t{{.name = {}, .start = {:#x}ULL, .pages = {}ULL, .prot = {}, .file = {}}},",
                json_c_str(&g.name),
                g.start,
                g.pages,
                g.prot,
                file_index(g.backing)
            )
        })
        .collect();
    table(out, "const struct region REGIONS[]", &rows);
    let _ = writeln!(out, "const int NREGIONS = {};", r.regions.len());
    let _ = writeln!(out, "const int NFILES = {};", r.files.len());
    let shmem: Vec<&str> = r
        .files
        .iter()
        .map(|f| if f.shmem { "1" } else { "0" })
        .collect();
    // C has no empty initialiser: a lone 0 when there are no files.
    let _ = writeln!(
        out,
        "const int FILE_SHMEM[] = {{{}}};\n",
        if shmem.is_empty() {
            "0".into()
        } else {
            shmem.join(", ")
        }
    );
}

/// The file index of a mapping, -1 for anonymous memory.
fn file_index(b: Backing) -> i64 {
    match b {
        Backing::Anon => -1,
        Backing::File { file, .. } => file as i64,
    }
}

/// `decl = { rows };`, with a zero row when there are none (C has no empty initialiser).
fn table(out: &mut String, decl: &str, rows: &[String]) {
    let _ = writeln!(out, "{decl} = {{");
    if rows.is_empty() {
        out.push_str("\t{0},\n");
    }
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
    out.push_str("};\n");
}

/// A C string literal whose value is `s` as a JSON string (quotes included).
fn json_c_str(s: &str) -> String {
    let mut json = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(json, "\\u{:04x}", c as u32);
            }
            c => json.push(c),
        }
    }
    json.push('"');
    c_str(&json)
}

/// A C string literal of `s`: printable ASCII as is (`"`, `\` and `?` escaped: no trigraphs),
/// every other byte in octal.
fn c_str(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' | b'\\' | b'?' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

/// `s` safe inside a C block comment.
fn comment(s: &str) -> String {
    s.replace("*/", "* /").replace('\n', " ")
}

/// Pages in `len` bytes.
fn pages(len: u64) -> u64 {
    len / PAGE
}

#[cfg(test)]
mod tests;
