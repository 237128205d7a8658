//! The C program of a scripted workload (`scripted::c_program`): generated, compiled with the
//! host's `cc -O2 -static -pthread` and, for a tiny scenario, run natively. Tests that need a
//! compiler say why and return when `cc` is missing or cannot link statically.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tierlab::Config;
use workloads::scripted::c_program::{generate, CProgramOptions};

/// A directory of its own under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("tierlab-cprog-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cc(args: &[&str], src: &Path, exe: &Path) -> std::io::Result<Output> {
    Command::new("cc")
        .args(["-O2", "-static", "-pthread"])
        .args(args)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .output()
}

/// None (with the reason printed) when the host cannot build static pthread programs.
fn toolchain(dir: &Path) -> Option<()> {
    let src = dir.join("probe.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; pthread_create(&t, 0, f, 0); return pthread_join(t, 0); }\n",
    )
    .unwrap();
    match cc(&[], &src, &dir.join("probe")) {
        Err(e) => {
            eprintln!("skipped: cannot run cc: {e}");
            None
        }
        Ok(o) if !o.status.success() => {
            eprintln!(
                "skipped: cc -static -pthread cannot link a program: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Ok(_) => Some(()),
    }
}

/// Compile `c` as strict C11 (warnings are errors); panics with the compiler's output if it fails.
fn compile(dir: &Path, name: &str, c: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, c).unwrap();
    let exe = dir.join(name);
    let o = cc(
        &["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror"],
        &src,
        &exe,
    )
    .unwrap();
    assert!(
        o.status.success(),
        "{name}.c does not compile:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// Run `exe` with `env`; (exit code, every stdout line as JSON).
fn run(exe: &Path, dir: &Path, env: &[(&str, &str)]) -> (i32, Vec<Value>) {
    run_with(exe, dir, &[], env)
}

/// `run` with command-line arguments.
fn run_with(exe: &Path, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Vec<Value>) {
    let o = Command::new(exe)
        .args(args)
        .env("TIERLAB_FILE_DIR", dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).expect("UTF-8 output");
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (o.status.code().unwrap_or(-1), lines)
}

fn workload(src: &str) -> toml::Table {
    let doc: toml::Table = toml::from_str(src).expect("test TOML parses");
    doc["workload"].as_table().unwrap().clone()
}

fn opts(nodes: u32, cpus: u32) -> CProgramOptions {
    CProgramOptions {
        sample_interval_ms: 5.0,
        counters: vec![
            "pgfault".into(),
            "numa_hit".into(),
            "no_such_counter".into(),
        ],
        end_counters: vec!["pgalloc_normal".into()],
        node_meminfo: vec![],
        nodes,
        cpus,
    }
}

/// Two threads, pinned to CPUs 0 and 1 when the host has two, else both on CPU 0.
fn tiny() -> String {
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let placement = if two { "\"pinned\"" } else { "[0, 0]" };
    format!(
        r#"
[workload]
type = "scripted"
name = "tiny"
threads = 2
placement = {placement}

[[workload.regions]]
name = "buf"
size_mib = 4

[[workload.regions]]
name = "file"
kind = "file"
size_kib = 256

[[workload.watch]]
name = "buf tail"
region = "buf"
offset_pages = 768

[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
write = true

[[workload.phases]]
name = "settle"
kind = "sleep"
ms = 60

[[workload.phases]]
name = "hot"
kind = "random"
region = "buf"
distribution = "zipf"
zipf_s = 0.99
duration_ms = 40
rate_per_s = 100000

[[workload.phases]]
name = "uniform"
kind = "random"
region = "buf"
offset_pages = 256
pages = 512
count = 2000
rate_per_s = 100000
write_fraction = 0.5

[[workload.phases]]
name = "scan"
kind = "stride"
region = "buf"
stride_bytes = 8192
gap_cycles = [100, 200]

[[workload.phases]]
name = "cold"
kind = "madvise"
region = "buf"
advice = "cold"

[[workload.phases]]
name = "ro"
kind = "mprotect"
region = "buf"
prot = "r"

[[workload.phases]]
name = "rw"
kind = "mprotect"
region = "buf"
prot = "rw"

[[workload.phases]]
name = "unmap"
kind = "munmap"
region = "buf"
offset_pages = 512
pages = 256

[[workload.phases]]
name = "remap"
kind = "mmap"
region = "buf"
offset_pages = 512
pages = 256

[[workload.phases]]
name = "refill"
kind = "touch"
region = "buf"
offset_pages = 512
pages = 256
order = "random"
write = true

[[workload.phases]]
name = "read file"
kind = "touch"
region = "file"
order = "reverse"

[[workload.phases]]
name = "pause"
kind = "sleep"
ms = 10
threads = [1]

[[workload.phases]]
name = "sync"
kind = "barrier"

[[workload.loop]]
times = 3
phases = ["scan", "cold"]
"#
    )
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn resident(sample: &Value, region: &str) -> u64 {
    sample["regions"][region]
        .as_array()
        .unwrap_or_else(|| panic!("regions.{region} in {sample}"))
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum()
}

/// The phase lines, the samples, and the checks every run must pass (all lines parse, `done`
/// is last, phases are contiguous).
fn split(lines: &[Value]) -> (Vec<&Value>, Vec<&Value>) {
    let last = lines.last().expect("some output");
    assert_eq!(last["done"], Value::Bool(true), "last line: {last}");
    let phases: Vec<&Value> = lines.iter().filter(|l| l.get("phase").is_some()).collect();
    let samples: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("t_ms").is_some() && l.get("done").is_none())
        .collect();
    for w in phases.windows(2) {
        assert_eq!(
            num(w[0], "end_ms"),
            num(w[1], "begin_ms"),
            "{} then {}",
            w[0],
            w[1]
        );
    }
    for p in &phases {
        assert!(num(p, "begin_ms") <= num(p, "end_ms"), "{p}");
    }
    // Each sample says how long it took and how much of the sampler's CPU.
    for s in &samples {
        assert!(num(s, "cpu_ms") >= 0.0 && num(s, "span_ms") >= 0.0, "{s}");
    }
    (phases, samples)
}

#[test]
fn tiny_scenario_runs_natively() {
    let dir = TempDir::new("tiny");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let c =
        generate(&workload(&tiny()), "tiny.toml", 7, &opts(2, 2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c,
        generate(&workload(&tiny()), "tiny.toml", 7, &opts(2, 2)).unwrap(),
        "deterministic"
    );
    let exe = compile(&dir.0, "tiny", &c);
    let t = std::time::Instant::now();
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert!(t.elapsed().as_secs() < 10, "took {:?}", t.elapsed());
    assert_eq!(code, 0, "{lines:?}");
    let (phases, samples) = split(&lines);

    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fill",
            "settle",
            "hot",
            "uniform",
            "scan",
            "cold",
            "scan",
            "cold",
            "scan",
            "cold",
            "ro",
            "rw",
            "unmap",
            "remap",
            "refill",
            "read file",
            "pause",
            "sync"
        ]
    );
    let phase = |n: &str| *phases.iter().find(|p| p["phase"] == n).unwrap();
    let acc = |n: &str| phase(n)["accesses"].as_u64().unwrap();
    assert_eq!(acc("fill"), 1024);
    assert_eq!(acc("uniform"), 2 * 2000);
    assert_eq!(acc("scan"), 2 * 512);
    assert_eq!(acc("refill"), 256);
    assert_eq!(acc("read file"), 64);
    assert_eq!(acc("cold"), 0);
    // 40 ms at 100 000/s on two threads: at most 8000 slots, stopped by the clock.
    let hot = phase("hot");
    assert!((1000..=8000).contains(&acc("hot")), "{hot}");
    let took = num(hot, "end_ms") - num(hot, "begin_ms");
    assert!((39.0..500.0).contains(&took), "{hot}");
    // 2000 paced slots at 10 µs: at least the last slot's 19.95 ms.
    let uniform = phase("uniform");
    assert!(
        num(uniform, "end_ms") - num(uniform, "begin_ms") >= 19.9,
        "{uniform}"
    );
    let settle = phase("settle");
    assert!(
        num(settle, "end_ms") - num(settle, "begin_ms") >= 60.0,
        "{settle}"
    );
    // A paced phase's line says where each thread's pace slots began (its first slot),
    // inside the phase; an unpaced one has none.
    for p in [hot, uniform] {
        let starts = p["pace_start_ms"].as_array().expect("pace_start_ms");
        assert_eq!(starts.len(), 2, "{p}");
        for s in starts {
            let s = s.as_f64().expect("both threads paced");
            assert!(
                num(p, "begin_ms") <= s + 0.001 && s <= num(p, "end_ms"),
                "{p}"
            );
        }
    }
    assert!(phase("scan").get("pace_start_ms").is_none());
    // Both phases pace at 10 µs a slot, in batches of 5 (50 µs, MIN_SLEEP_NS): the two
    // threads' slots lie half a batch apart, however the barrier released them.
    for p in [hot, uniform] {
        let starts = p["pace_start_ms"].as_array().unwrap();
        let ns = |i: usize| (starts[i].as_f64().unwrap() * 1e6).round() as i64;
        assert_eq!((ns(1) - ns(0)).rem_euclid(50_000), 25_000, "{p}");
    }

    assert!(samples.len() >= 5, "{} samples", samples.len());
    // The end counters are in the last sample only.
    let ends: Vec<bool> = samples
        .iter()
        .map(|s| s["vmstat"].get("pgalloc_normal").is_some())
        .collect();
    assert!(ends[ends.len() - 1], "{ends:?}");
    assert!(ends[..ends.len() - 1].iter().all(|e| !e), "{ends:?}");
    for s in &samples {
        assert_eq!(s["regions"].as_object().unwrap().len(), 3, "{s}");
        assert_eq!(s["vmstat"]["no_such_counter"], Value::Null, "{s}");
        assert!(s["vmstat"]["pgfault"].is_u64(), "{s}");
        assert!(s["tlb"].is_array(), "{s}");
        assert!(s["regions"]["buf"].as_array().unwrap().len() >= 2, "{s}");
        // No node meminfo fields asked for: no key (the sample line is the guest's work).
        assert!(s.get("node_meminfo").is_none(), "{s}");
    }
    // While "settle" sleeps, everything "fill" touched is resident.
    let (from, to) = (num(phase("fill"), "end_ms"), num(settle, "end_ms") - 1.0);
    let during: Vec<&&Value> = samples
        .iter()
        .filter(|s| (from..to).contains(&num(s, "t_ms")))
        .collect();
    assert!(!during.is_empty(), "no sample during settle ({from}..{to})");
    for s in during {
        assert_eq!(resident(s, "buf"), 1024, "{s}");
        assert_eq!(resident(s, "buf tail"), 256, "{s}");
    }
    // The last sample (after every phase): buf refilled, the file read, and each worker's
    // published access count adds up to the phases' accesses.
    let end = samples.last().unwrap();
    let published: u64 = (end["accesses"].as_array().unwrap().iter())
        .map(|a| a.as_u64().unwrap())
        .sum();
    let counted: u64 = phases.iter().map(|p| p["accesses"].as_u64().unwrap()).sum();
    assert_eq!(end["accesses"].as_array().unwrap().len(), 2, "{end}");
    assert_eq!(published, counted, "{end}");
    // Each worker's run time and run-queue wait (schedstat) while it lives, where the kernel
    // keeps them: every worker has run by some sample before the end.
    assert_eq!(end["schedstat"].as_array().unwrap().len(), 2, "{end}");
    if std::path::Path::new("/proc/self/schedstat").exists() {
        for w in 0..2 {
            let ran = (samples.iter()).any(|s| s["schedstat"][w][0].as_u64().unwrap() > 0);
            assert!(ran, "worker {w} never shows run time");
        }
    }
    assert!(num(end, "t_ms") >= num(phases.last().unwrap(), "end_ms"));
    assert_eq!(resident(end, "buf"), 1024, "{end}");
    assert!(lines.iter().all(|l| l.get("error").is_none()));
}

/// Fill 2 MiB, move it to node 0, sleep 30 ms while samples are taken, drop it.
const FILL_WAIT_DROP: &str = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
size_mib = 2
[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
write = true
[[workload.phases]]
name = "move"
kind = "move_pages"
region = "buf"
node = 0
[[workload.phases]]
name = "wait"
kind = "sleep"
ms = 30
[[workload.phases]]
name = "drop"
kind = "madvise"
region = "buf"
advice = "dontneed"
"#;

/// Samples taken while `FILL_WAIT_DROP` sleeps, and the last one (after the drop).
fn fill_wait_drop_samples(lines: &[Value]) -> (Vec<&Value>, &Value) {
    let (phases, samples) = split(lines);
    let (from, to) = (num(phases[1], "end_ms"), num(phases[2], "end_ms") - 1.0);
    let during: Vec<&Value> = (samples.iter().copied())
        .filter(|s| (from..to).contains(&num(s, "t_ms")))
        .collect();
    (during, *samples.last().unwrap())
}

#[test]
fn the_program_reports_where_the_next_tick_lies_against_its_start() {
    let dir = TempDir::new("tick");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let c = generate(&workload(&tiny()), "tiny.toml", 7, &opts(2, 2)).unwrap();
    let (code, lines) = run(&compile(&dir.0, "tick", &c), &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    let expiry: Vec<i64> = (lines.iter())
        .filter_map(|l| l.get("tick_expiry_ns").and_then(Value::as_i64))
        .collect();
    // Root reads the tick from /proc/timer_list (as /init does in the guest); others cannot.
    let listed = std::fs::read_to_string("/proc/timer_list")
        .is_ok_and(|t| t.contains("tick_nohz_handler") || t.contains("tick_sched_timer"));
    if !listed {
        assert!(expiry.is_empty(), "{lines:?}");
        eprintln!("skipped: /proc/timer_list unreadable or without a tick");
        return;
    }
    assert_eq!(expiry.len(), 1, "{lines:?}");
    // Read just before t0: the tick is at most a few ms past, or ahead (an idle CPU's
    // stopped tick is re-armed for its next timer).
    assert!(expiry[0] > -100_000_000, "{}", expiry[0]);
    assert!(
        lines[0].get("tick_expiry_ns").is_some(),
        "the first line: {:?}",
        lines[0]
    );
}

#[test]
fn residency_is_the_same_from_numa_maps_move_pages_and_pagemap() {
    let dir = TempDir::new("residency");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let c = generate(&workload(FILL_WAIT_DROP), "t.toml", 1, &opts(1, 1)).unwrap();
    let exe = compile(&dir.0, "residency", &c);
    // Without watches the sampler reads numa_maps; TIERLAB_RESIDENCY=move_pages asks each
    // page; =mincore reads the pagemap's present bits (with a warning), as without NUMA.
    for how in ["", "move_pages", "mincore"] {
        let (code, lines) = run(&exe, &dir.0, &[("TIERLAB_RESIDENCY", how)]);
        assert_eq!(code, 0, "{how}: {lines:?}");
        if how == "mincore" {
            let warnings = lines.iter().filter(|l| l.get("warning").is_some()).count();
            assert_eq!(warnings, 1, "{lines:?}");
        }
        let (during, last) = fill_wait_drop_samples(&lines);
        assert!(!during.is_empty(), "{how}");
        for s in during {
            assert_eq!(s["regions"]["buf"], serde_json::json!([512]), "{how}: {s}");
        }
        // After MADV_DONTNEED nothing is resident.
        assert_eq!(last["regions"]["buf"], serde_json::json!([0]), "{how}");
    }
}

#[test]
fn a_shmem_region_is_mapped_from_a_memfd_natively() {
    let dir = TempDir::new("shmem");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let src = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
kind = "shmem"
pages = 64
[[workload.phases]]
kind = "touch"
region = "buf"
write = true
[[workload.phases]]
kind = "munmap"
region = "buf"
[[workload.phases]]
kind = "mmap"
region = "buf"
[[workload.phases]]
kind = "touch"
region = "buf"
"#;
    let c = generate(&workload(src), "t.toml", 1, &opts(1, 1)).unwrap();
    assert!(
        c.contains("const int FILE_SHMEM[] = {1};"),
        "the file table marks it"
    );
    let exe = compile(&dir.0, "shmem", &c);
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    let (phases, samples) = split(&lines);
    assert_eq!(phases.len(), 4);
    // Mapped again from the same fd after the munmap, and read: all 64 pages resident.
    assert_eq!(resident(samples.last().unwrap(), "buf"), 64);
}

#[test]
fn failures_print_an_error_and_exit_1() {
    let dir = TempDir::new("errors");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let base = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
pages = 16
"#;
    // A store to a read-only region: SIGSEGV.
    let segv = format!(
        "{base}[[workload.phases]]\nkind = \"mprotect\"\nregion = \"buf\"\nprot = \"r\"\n\
         [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n"
    );
    // mmap over the mapped region: EEXIST.
    let eexist = format!("{base}[[workload.phases]]\nkind = \"mmap\"\nregion = \"buf\"\n");
    for (name, src, want) in [
        ("segv", segv, "SIGSEGV at 0x10000000"),
        ("eexist", eexist, "in use"),
    ] {
        let c = generate(&workload(&src), "t.toml", 1, &opts(1, 1)).unwrap();
        let exe = compile(&dir.0, name, &c);
        let (code, lines) = run(&exe, &dir.0, &[]);
        assert_eq!(code, 1, "{name}: {lines:?}");
        let last = lines.last().unwrap();
        let msg = last["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {last}"));
        assert!(
            msg.contains(want) || msg.contains("File exists"),
            "{name}: {msg}"
        );
    }
}

#[test]
fn bad_tables_fail_as_build_does() {
    let src = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
pages = 16
[[workload.phases]]
kind = "touch"
region = "nope"
"#;
    let e = generate(&workload(src), "t.toml", 1, &opts(1, 1)).unwrap_err();
    assert!(
        e.to_string().contains("key `workload.phases[0].region`"),
        "{e}"
    );
    let mut o = opts(1, 1);
    o.sample_interval_ms = 0.0;
    assert!(generate(&workload(&src.replace("nope", "buf")), "t.toml", 1, &o).is_err());
}

/// Two workers fill 4 MiB; each forks two children that write half of their copy (while the
/// workers read), waits for them, and reads again.
const FORK_WAIT: &str = r#"
[workload]
type = "scripted"
threads = 2
[[workload.regions]]
name = "buf"
size_mib = 4
[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
write = true
[[workload.phases]]
name = "child writes"
kind = "touch"
region = "buf"
pages = 512
write = true
threads = [0, 1]
[[workload.phases]]
name = "kids"
kind = "fork"
child = ["child writes"]
threads = [0, 1]
count = 2
[[workload.phases]]
name = "reads"
kind = "random"
region = "buf"
count = 2000
[[workload.phases]]
name = "reap"
kind = "wait"
threads = [0, 1]
[[workload.phases]]
name = "read again"
kind = "touch"
region = "buf"
"#;

#[test]
fn fork_and_wait_phases_run_natively() {
    let dir = TempDir::new("fork");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let c = generate(&workload(FORK_WAIT), "fork.toml", 3, &opts(1, 1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.contains("static const int CHILD_2[] = {1};"),
        "the child list"
    );
    let exe = compile(&dir.0, "fork", &c);
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    assert!(lines.iter().all(|l| l.get("error").is_none()), "{lines:?}");
    let (phases, samples) = split(&lines);
    // The workers' phases; the children's phase is theirs alone.
    let names: Vec<&str> = (phases.iter())
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fill", "kids", "reads", "reap", "read again"]);
    let acc = |i: usize| phases[i]["accesses"].as_u64().unwrap();
    assert_eq!((acc(0), acc(1), acc(2), acc(4)), (1024, 0, 4000, 1024));
    // One line per child: two per worker, numbered per worker, each writing 512 pages.
    let mut kids: Vec<(u64, u64)> = (lines.iter())
        .filter(|l| l.get("child_phase").is_some())
        .map(|l| {
            assert_eq!(l["child_phase"], "child writes", "{l}");
            assert_eq!(l["accesses"], 512, "{l}");
            assert!(num(l, "begin_ms") <= num(l, "end_ms"), "{l}");
            // Waited for in "reap".
            assert!(num(l, "end_ms") <= num(phases[3], "end_ms"), "{l}");
            (l["thread"].as_u64().unwrap(), l["child"].as_u64().unwrap())
        })
        .collect();
    kids.sort_unstable();
    assert_eq!(kids, [(0, 0), (0, 1), (1, 0), (1, 1)]);
    // The children published nothing: the workers' counts are the workers' phases'.
    let end = samples.last().unwrap();
    let published: u64 = (end["accesses"].as_array().unwrap().iter())
        .map(|a| a.as_u64().unwrap())
        .sum();
    assert_eq!(published, 1024 + 4000 + 1024, "{end}");
    // The children's copies went with them; the workload's region is whole.
    assert_eq!(resident(end, "buf"), 1024, "{end}");
}

/// The sampler runs pinned to the first CPU no worker is pinned to, as the stand-in's
/// sampler thread is placed (scripted/mod.rs). On a 2-CPU host that is the only CPU left, so
/// only a host with 3 or more tells the pin from "any CPU but the workers'".
#[test]
fn the_sampler_runs_on_the_first_cpu_the_workers_leave() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: the host has one CPU");
        return;
    }
    let dir = TempDir::new("sampler-cpu");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let src = r#"
[workload]
type = "scripted"
threads = 1
placement = [0]
[[workload.regions]]
name = "buf"
size_mib = 4
[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
write = true
[[workload.phases]]
name = "idle"
kind = "sleep"
ms = 40
"#;
    let c =
        generate(&workload(src), "sampler.toml", 1, &opts(1, 2)).unwrap_or_else(|e| panic!("{e}"));
    let exe = compile(&dir.0, "sampler", &c);
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    let (_, samples) = split(&lines);
    assert!(samples.len() >= 3, "{samples:?}");
    for s in &samples {
        assert_eq!(s["sampler_cpu"], 1, "{s}");
    }
}

/// A child that faults fails the program when it is waited for.
#[test]
fn a_failing_child_fails_the_program() {
    let dir = TempDir::new("fork-fail");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let src = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
pages = 16
prot = "r"
[[workload.phases]]
name = "write"
kind = "touch"
region = "buf"
write = true
[[workload.phases]]
kind = "fork"
child = ["write"]
"#;
    let c = generate(&workload(src), "t.toml", 1, &opts(1, 1)).unwrap();
    let exe = compile(&dir.0, "fork_fail", &c);
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert_eq!(code, 1, "{lines:?}");
    let errors: Vec<&str> = (lines.iter())
        .filter_map(|l| l.get("error").and_then(Value::as_str))
        .collect();
    // The child's SIGSEGV, then main's report when it reaps the child at the end.
    assert_eq!(errors.len(), 2, "{lines:?}");
    assert!(errors[0].contains("SIGSEGV at 0x10000000"), "{errors:?}");
    assert!(errors[1].contains("failed"), "{errors:?}");
    assert!(lines.last().unwrap().get("error").is_some(), "{lines:?}");
}

/// Two THP-sized regions: `huge` asks for THPs (MADV_HUGEPAGE), `small` refuses them
/// (MADV_NOHUGEPAGE); both are written, then sampled while a sleep holds them.
const HUGEPAGE: &str = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "huge"
size_mib = 4
[[workload.regions]]
name = "small"
size_mib = 2
[[workload.phases]]
name = "advise huge"
kind = "madvise"
region = "huge"
advice = "hugepage"
[[workload.phases]]
name = "advise small"
kind = "madvise"
region = "small"
advice = "nohugepage"
[[workload.phases]]
name = "fill huge"
kind = "touch"
region = "huge"
write = true
[[workload.phases]]
name = "fill small"
kind = "touch"
region = "small"
write = true
[[workload.phases]]
name = "hold"
kind = "sleep"
ms = 30
"#;

/// `meminfo` of a node as Linux 6.12 prints it (node_read_meminfo), trimmed.
const NODE0_MEMINFO: &str = "Node 0 MemTotal:         218352 kB
Node 0 MemFree:          150000 kB
Node 0 AnonPages:         12288 kB
Node 0 AnonHugePages:      4096 kB
Node 0 ShmemHugePages:        0 kB
";

#[test]
fn a_hugepage_madvise_phase_runs_natively() {
    let dir = TempDir::new("hugepage");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let mut o = opts(2, 1);
    o.node_meminfo = vec!["AnonHugePages".into(), "NoSuchField".into()];
    let c = generate(&workload(HUGEPAGE), "t.toml", 1, &o).unwrap();
    assert!(c.contains("#define TIERLAB_NODE_MEMINFO 1\n"));
    // Without fields the reader is not compiled in: the program of a THP-off scenario is
    // the binary it was before node meminfo sampling existed.
    let plain = generate(&workload(HUGEPAGE), "t.toml", 1, &opts(2, 1)).unwrap();
    assert!(!plain.contains("#define TIERLAB_NODE_MEMINFO"));
    assert!(!plain.contains("NODE_MEMINFO[] ="));
    // Linux's advice numbers as they are (MADV_HUGEPAGE 14, MADV_NOHUGEPAGE 15), on regions
    // at the simulator's 2 MiB-aligned addresses (a 2 MiB gap between them).
    assert!(c.contains(".kind = K_MADVISE, .addr = 0x10000000ULL, .len = 4194304ULL, .advice = 14"));
    assert!(c.contains(".kind = K_MADVISE, .addr = 0x10600000ULL, .len = 2097152ULL, .advice = 15"));
    assert!(
        c.contains(".name = \"\\\"huge\\\"\", .start = 0x10000000ULL"),
        "{c}"
    );
    let exe = compile(&dir.0, "hugepage", &c);
    if !Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("skipped the run: the host kernel has no THP (madvise would be EINVAL)");
        return;
    }
    // The host's own node files: AnonHugePages is a number where the node exists.
    let (code, lines) = run(&exe, &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    let (phases, samples) = split(&lines);
    assert_eq!(phases.len(), 5);
    let last = samples.last().unwrap();
    assert_eq!(resident(last, "huge"), 1024, "{last}");
    assert_eq!(resident(last, "small"), 512, "{last}");
    for s in &samples {
        let field = s["node_meminfo"]["AnonHugePages"]
            .as_array()
            .expect("AnonHugePages");
        assert_eq!(field.len(), 2, "{s}");
        if Path::new("/sys/devices/system/node/node0/meminfo").exists() {
            assert!(field[0].is_u64(), "{s}");
        }
        assert_eq!(s["node_meminfo"]["NoSuchField"][0], Value::Null, "{s}");
    }
    // A node directory of test files: node 1 has none.
    let nodes = dir.0.join("nodes");
    std::fs::create_dir_all(nodes.join("node0")).unwrap();
    std::fs::write(nodes.join("node0/meminfo"), NODE0_MEMINFO).unwrap();
    let (code, lines) = run(
        &exe,
        &dir.0,
        &[("TIERLAB_NODE_DIR", nodes.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{lines:?}");
    let (_, samples) = split(&lines);
    for s in &samples {
        assert_eq!(
            s["node_meminfo"],
            serde_json::json!({"AnonHugePages": [4096, null], "NoSuchField": [null, null]}),
            "{s}"
        );
    }
}

/// Every shipped scripted scenario gives C that compiles (none is run: they are big).
#[test]
fn shipped_scripted_scenarios_compile() {
    let dir = TempDir::new("shipped");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let scenarios = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut compiled = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&scenarios)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for path in files {
        let cfg = Config::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
        if cfg.workload.get("type").and_then(|v| v.as_str()) != Some("scripted") {
            continue;
        }
        let origin = path.display().to_string();
        let o = CProgramOptions {
            sample_interval_ms: cfg.sim.timeline_interval_ms,
            counters: vec!["pgmigrate_success".into(), "numa_hint_faults".into()],
            end_counters: vec![],
            node_meminfo: vec![],
            nodes: cfg.machine.nodes.len() as u32,
            cpus: cfg.machine.cpus,
        };
        let c = generate(&cfg.workload, &origin, cfg.scenario.seed, &o)
            .unwrap_or_else(|e| panic!("{e}"));
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        compile(&dir.0, &name, &c);
        compiled.push(name);
    }
    for want in ["hot_set", "sporadic", "swap_bench", "swap_young"] {
        assert!(compiled.iter().any(|c| c == want), "{want}: {compiled:?}");
    }
}

/// `/proc/zoneinfo` as Linux 6.12 prints it (`zoneinfo_show_print`), trimmed: node 0 with
/// DMA and DMA32 populated and Normal, Movable and Device not; node 1 with DMA32 only. The
/// per-CPU pagesets' `high:` lines must not be taken for the zone's watermark.
const ZONEINFO_6_12: &str = "Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 12
      nr_active_anon 3
      pgpromote_success 0
  pages free     3584
        boost    0
        min      29
        low      36
        high     43
        promo    50
        spanned  4095
        present  3998
        managed  3840
        cma      0
        protection: (0, 181, 181, 181, 181)
      nr_free_pages 3584
      numa_hit     7
  pagesets
    cpu: 0
              count:    0
              high:     0
              batch:    1
              high_min: 0
              high_max: 0
  vm stats threshold: 2
  node_unreclaimable:  0
  start_pfn:           1
Node 0, zone    DMA32
  pages free     41000
        boost    0
        min      1229
        low      1536
        high     1843
        promo    2150
        spanned  61440
        present  61440
        managed  46473
        cma      0
        protection: (0, 0, 0, 0, 0)
      nr_free_pages 41000
  pagesets
    cpu: 0
              count:    51
              high:     999
              batch:    63
  node_unreclaimable:  0
  start_pfn:           4096
Node 0, zone   Normal
  pages free     0
        boost    0
        min      0
        low      0
        high     0
        promo    0
        spanned  0
        present  0
        managed  0
        cma      0
        protection: (0, 0, 0, 0, 0)
Node 0, zone  Movable
  pages free     0
        boost    0
        min      0
        low      0
        high     0
        promo    0
        spanned  0
        present  0
        managed  0
        cma      0
        protection: (0, 0, 0, 0, 0)
Node 1, zone      DMA
  pages free     0
        boost    0
        min      0
        low      0
        high     0
        promo    0
        spanned  0
        present  0
        managed  0
        cma      0
        protection: (0, 0, 0, 0, 0)
Node 1, zone    DMA32
  per-node stats
      nr_inactive_anon 0
  pages free     130000
        boost    0
        min      2800
        low      3500
        high     4200
        promo    4900
        spanned  131072
        present  131072
        managed  131000
        cma      0
        protection: (0, 0, 0, 0, 0)
      nr_free_pages 130000
  pagesets
    cpu: 0
              count:    0
              high:     1234
  node_unreclaimable:  0
  start_pfn:           65536
";

/// A one-phase program that only sleeps: its samples carry the zones.
fn zone_sampler(dir: &Path) -> PathBuf {
    let src = r#"
[workload]
type = "scripted"
[[workload.regions]]
name = "buf"
size_mib = 1
[[workload.phases]]
name = "wait"
kind = "sleep"
ms = 30
"#;
    let c = generate(&workload(src), "t.toml", 1, &opts(2, 1)).unwrap();
    compile(dir, "zones", &c)
}

/// `/proc/buddyinfo` for the same zones (free blocks of order 0 to 10): 3 + 2·2 + 1·4 + 1·1024
/// = 1035 pages in DMA, 1 + 1·1024 = 1025 in node 0's DMA32; node 1's DMA32 is not listed.
const BUDDYINFO_6_12: &str = "Node 0, zone      DMA      3      2      1      0      0      0      0      0      0      0      1 
Node 0, zone    DMA32      1      0      0      0      0      0      0      0      0      0      1 
";

#[test]
fn samples_carry_the_populated_zones_of_zoneinfo() {
    let dir = TempDir::new("zoneinfo");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let exe = zone_sampler(&dir.0);
    let (zi, bi) = (dir.0.join("zoneinfo.txt"), dir.0.join("buddyinfo.txt"));
    std::fs::write(&zi, ZONEINFO_6_12).unwrap();
    std::fs::write(&bi, BUDDYINFO_6_12).unwrap();
    let env = [
        ("TIERLAB_ZONEINFO", zi.to_str().unwrap()),
        ("TIERLAB_BUDDYINFO", bi.to_str().unwrap()),
    ];
    let (code, lines) = run(&exe, &dir.0, &env);
    assert_eq!(code, 0, "{lines:?}");
    let (_, samples) = split(&lines);
    assert!(samples.len() >= 3, "{} samples", samples.len());
    let zones = |free: [Value; 3], pcp: [Value; 3], pcp_high: [Value; 3]| {
        let ([a, b, c], [pa, pb, pc], [ha, hb, hc]) = (free, pcp, pcp_high);
        serde_json::json!([
            {"node": 0, "zone": "DMA", "free": a, "min": 29, "low": 36, "high": 43,
             "promo": 50, "managed": 3840, "pcp": pa, "pcp_high": ha,
             "protection": [0, 181, 181, 181, 181]},
            {"node": 0, "zone": "DMA32", "free": b, "min": 1229, "low": 1536, "high": 1843,
             "promo": 2150, "managed": 46473, "pcp": pb, "pcp_high": hb,
             "protection": [0, 0, 0, 0, 0]},
            {"node": 1, "zone": "DMA32", "free": c, "min": 2800, "low": 3500, "high": 4200,
             "promo": 4900, "managed": 131000, "pcp": pc, "pcp_high": hc,
             "protection": [0, 0, 0, 0, 0]},
        ])
    };
    // The first and the last sample read zoneinfo (with the pagesets' counts and highs);
    // those between, buddyinfo's free pages and no per-CPU figures.
    let full = zones(
        [3584.into(), 41000.into(), 130000.into()],
        [0.into(), 51.into(), 0.into()],
        [0.into(), 999.into(), 1234.into()],
    );
    assert_eq!(samples[0]["zones"], full);
    assert_eq!(samples.last().unwrap()["zones"], full);
    let null = || [Value::Null, Value::Null, Value::Null];
    let between = zones([1035.into(), 1025.into(), Value::Null], null(), null());
    for s in &samples[1..samples.len() - 1] {
        assert_eq!(s["zones"], between, "{s}");
    }

    // A kernel without the promo line, and a file that cannot be read.
    let old = dir.0.join("old.txt");
    std::fs::write(&old, ZONEINFO_6_12.replace("        promo    50\n", "")).unwrap();
    let (_, lines) = run(&exe, &dir.0, &[("TIERLAB_ZONEINFO", old.to_str().unwrap())]);
    let (_, samples) = split(&lines);
    assert_eq!(samples[0]["zones"][0]["promo"], Value::Null);
    assert_eq!(samples[0]["zones"][0]["high"], 43);
    let missing = dir.0.join("none.txt");
    let (code, lines) = run(
        &exe,
        &dir.0,
        &[("TIERLAB_ZONEINFO", missing.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{lines:?}");
    let (_, samples) = split(&lines);
    assert!(samples.iter().all(|s| s["zones"] == Value::Null));
}

#[test]
fn the_hosts_zoneinfo_parses() {
    let dir = TempDir::new("hostzones");
    if toolchain(&dir.0).is_none() {
        return;
    }
    if std::fs::read_to_string("/proc/zoneinfo").is_err() {
        eprintln!("skipped: the host has no /proc/zoneinfo");
        return;
    }
    let (code, lines) = run(&zone_sampler(&dir.0), &dir.0, &[]);
    assert_eq!(code, 0, "{lines:?}");
    let (_, samples) = split(&lines);
    let zones = samples[0]["zones"].as_array().expect("zones");
    assert!(zones.iter().any(|z| z["node"] == 0), "{zones:?}");
    // Between the first and last sample the free pages come from the host's buddyinfo.
    for s in &samples[1..] {
        for z in s["zones"].as_array().expect("zones") {
            assert!(z["free"].is_u64(), "{z}");
        }
    }
    for z in zones {
        let get = |k: &str| z[k].as_u64().unwrap_or_else(|| panic!("{k} in {z}"));
        assert!(get("min") <= get("low") && get("low") <= get("high"), "{z}");
        get("managed");
        assert!(!z["protection"].as_array().unwrap().is_empty(), "{z}");
    }
}

#[test]
fn the_pte_probe_times_mprotect_after_the_workload() {
    let dir = TempDir::new("pte");
    if toolchain(&dir.0).is_none() {
        return;
    }
    let c = generate(&workload(&tiny()), "tiny.toml", 7, &opts(2, 2)).unwrap();
    let exe = compile(&dir.0, "tiny", &c);
    let (code, lines) = run_with(&exe, &dir.0, &["--pte-probe"], &[]);
    assert_eq!(code, 0, "{lines:?}");
    let at = lines.iter().position(|l| l.get("pte_probe").is_some());
    let at = at.expect("a probe line");
    let probe = &lines[at]["pte_probe"];
    // The largest anonymous read-write region of the tiny scenario, after its phases.
    assert!(num(probe, "pages") >= 1.0);
    assert!(num(probe, "ns") > 0.0, "{probe}");
    assert!(lines[..at].iter().any(|l| l.get("phase").is_some()));
    assert_eq!(lines.last().unwrap()["done"], true);
    // The migration probe moves pages to node 1: on a host with one node it reports nothing,
    // and the run still ends well.
    let migrate = lines.iter().find_map(|l| l.get("migrate_probe"));
    if std::path::Path::new("/sys/devices/system/node/node1").exists() {
        let m = migrate.expect("a migrate_probe line with two nodes");
        assert!(num(m, "ns") > 0.0, "{m}");
    } else {
        assert!(migrate.is_none(), "{migrate:?}");
    }
    // And a paced sleep on the thread's run time, ahead and already past.
    let sleep = lines.iter().find_map(|l| l.get("sleep_probe"));
    let sleep = sleep.expect("a sleep_probe line");
    assert_eq!(num(sleep, "sleeps"), 2000.0, "{sleep}");
    assert!(
        num(sleep, "ns") > 0.0 && num(sleep, "past_ns") > 0.0,
        "{sleep}"
    );
    // Without the flag, no probe.
    let (_, plain) = run(&exe, &dir.0, &[]);
    assert!(plain.iter().all(|l| l.get("pte_probe").is_none()));
    assert!(plain.iter().all(|l| l.get("sleep_probe").is_none()));
}
