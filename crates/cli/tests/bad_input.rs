//! Bad input through the real binary: every row must end within seconds, with exit code 1
//! (not a signal, not a panic, not an allocation abort), and an error that names what was
//! wrong: the key, and the file or the `--set` it came from.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo;

/// The scenario most `--set` rows are applied to.
const XS: &str = "scenarios/xsbench-small.toml";
/// A scripted scenario, for the phase keys.
const HOT: &str = "scenarios/validate/hot_small.toml";
/// How long a row may take: a config error is reported in milliseconds.
const LIMIT: Duration = Duration::from_secs(10);

/// Run tierlab with `args`; kill it after LIMIT. Returns (exit code, stderr): no code when a
/// signal ended it or it was killed for running too long.
fn run(args: &[String]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierlab"))
        .args(args)
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tierlab");
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            let err = reader.join().unwrap_or_default();
            return (
                None,
                format!("still running after {LIMIT:?}, killed; {err}"),
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status.code(), reader.join().unwrap_or_default())
}

/// One bad input: the arguments and the texts stderr must contain.
struct Row {
    args: Vec<String>,
    needles: Vec<String>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `run FILE --set ASSIGNMENT`: the error must name the file, `--set` and `key`.
fn set_on(file: &str, assignment: &str, key: &str) -> Row {
    Row {
        args: strings(&["run", file, "--quiet", "--set", assignment]),
        needles: strings(&[file, "--set", key]),
    }
}

fn set(assignment: &str, key: &str) -> Row {
    set_on(XS, assignment, key)
}

/// `run FILE` for a file this test wrote: the error must name the file and `key`.
fn file(path: &Path, needles: &[&str]) -> Row {
    let p = path.display().to_string();
    let mut n = strings(needles);
    n.push(p.clone());
    Row {
        args: vec!["run".into(), p, "--quiet".into()],
        needles: n,
    }
}

/// Any other command line, with the texts its error must contain.
fn cli(args: &[&str], needles: &[&str]) -> Row {
    Row {
        args: strings(args),
        needles: strings(needles),
    }
}

/// A small valid scenario to break one key of (written into `dir`).
const VALID: &str = r#"
[scenario]
name = "bad-input"
[machine]
cpus = 4
[[machine.nodes]]
capacity_mib = 1024
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[workload]
type = "xsbench"
size = "small"
threads = 4
particles = 100
"#;

fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write test file");
    p
}

fn rows(dir: &Path) -> Vec<Row> {
    let deep_key = format!("{}b=1", "a.".repeat(30_000));
    let deep_value = format!("a={}{}", "[".repeat(30_000), "]".repeat(30_000));
    let mut r = vec![
        // --- the issue's own cases ---
        // A machine larger than the host is fine (its frames are initialised as used); a
        // workload whose frames the host cannot hold on it is not.
        cli(
            &[
                "run",
                XS,
                "--quiet",
                "--set",
                "machine.nodes.0.capacity_mib=4194304",
                "--set",
                "workload.gridpoints=100000000",
            ],
            &[XS, "--set", "machine.nodes", "may touch"],
        ),
        cli(
            &[
                "run",
                XS,
                "--quiet",
                "--set",
                "machine.nodes.0.capacity_mib=16000000",
                "--set",
                "workload.gridpoints=100000000",
            ],
            &[XS, "--set", "machine.nodes", "may touch"],
        ),
        set(
            "machine.nodes.0.cpus=\"0-4294967295\"",
            "machine.nodes[0].cpus",
        ),
        set("machine_preset=\"/dev/zero\"", "machine_preset"),
        set(&deep_key, "at most 16"),
        set(
            "machine.nodes.0.read_latency_ns=1e300",
            "machine.nodes[0].read_latency_ns",
        ),
        set(
            "sim.timeline_interval_ms=0.0001",
            "sim.timeline_interval_ms",
        ),
        set("workload.particles=1e12", "workload.particles"),
        set("machine.mlp=inf", "machine.mlp"),
        set("vm.min_free_kbytes=100000000", "vm.min_free_kbytes"),
        set("cost.migrate_copy_gbps=0", "cost.migrate_copy_gbps"),
        set("cost.migrate_copy_gbps=-1", "cost.migrate_copy_gbps"),
        set("cost.migrate_copy_gbps=nan", "cost.migrate_copy_gbps"),
        // --- [scenario] ---
        set("scenario.seed=-1", "scenario.seed"),
        set("scenario.name=5", "scenario.name"),
        set("scenario.colour=1", "scenario.colour"),
        // --- [machine] ---
        set("machine.cpus=0", "machine.cpus"),
        set("machine.cpus=257", "machine.cpus"),
        set("machine.cpu_ghz=0", "machine.cpu_ghz"),
        set("machine.cpu_ghz=25", "machine.cpu_ghz"),
        set("machine.cpu_ghz=nan", "machine.cpu_ghz"),
        set("machine.mlp=0.5", "machine.mlp"),
        set("machine.mlp=1e9", "machine.mlp"),
        set("machine.phys_bits=60", "machine.phys_bits"),
        set("machine.arch=\"sparc\"", "machine.arch"),
        set("machine.lapic_timer_period=1", "machine.lapic_timer_period"),
        set("machine.cache_kib=100", "machine.cache_kib"),
        set("machine.tlb.dtlb_ways=0", "machine.tlb.dtlb"),
        set("machine.tlb.stlb_entries=1000", "machine.tlb.stlb_entries"),
        set("machine.tlb.nr_dyn_asids=0", "machine.tlb.nr_dyn_asids"),
        set("machine.nodes=[]", "machine.nodes"),
        set("machine.distance=[[10, 20]]", "machine.distance"),
        set(
            "machine.data_cache_per_cpu_kib=-1",
            "machine.data_cache_per_cpu_kib",
        ),
        // --- [[machine.nodes]] ---
        set(
            "machine.nodes.0.capacity_mib=0",
            "machine.nodes[0].capacity_mib",
        ),
        set(
            "machine.nodes.0.capacity_mib=-1",
            "machine.nodes[0].capacity_mib",
        ),
        set(
            "machine.nodes.0.read_latency_ns=0",
            "machine.nodes[0].read_latency_ns",
        ),
        set(
            "machine.nodes.0.read_latency_ns=-5",
            "machine.nodes[0].read_latency_ns",
        ),
        set(
            "machine.nodes.0.read_latency_ns=nan",
            "machine.nodes[0].read_latency_ns",
        ),
        set(
            "machine.nodes.0.write_latency_ns=inf",
            "machine.nodes[0].write_latency_ns",
        ),
        set(
            "machine.nodes.0.write_latency_ns=1e7",
            "machine.nodes[0].write_latency_ns",
        ),
        set(
            "machine.nodes.0.read_bandwidth_gbps=0",
            "machine.nodes[0].read_bandwidth_gbps",
        ),
        set(
            "machine.nodes.0.read_bandwidth_gbps=-1",
            "machine.nodes[0].read_bandwidth_gbps",
        ),
        set(
            "machine.nodes.0.read_bandwidth_gbps=nan",
            "machine.nodes[0].read_bandwidth_gbps",
        ),
        set(
            "machine.nodes.0.write_bandwidth_gbps=inf",
            "machine.nodes[0].write_bandwidth_gbps",
        ),
        set(
            "machine.nodes.0.write_bandwidth_gbps=1e9",
            "machine.nodes[0].write_bandwidth_gbps",
        ),
        set("machine.nodes.0.cpus=\"0-\"", "machine.nodes[0].cpus"),
        set("machine.nodes.0.cpus=\"x\"", "machine.nodes[0].cpus"),
        set("machine.nodes.0.cpus=\"3-1\"", "machine.nodes[0].cpus"),
        set("machine.nodes.0.cpus=\"0-300\"", "machine.nodes[0].cpus"),
        set("machine.nodes.0.cpus=\"0-3,0\"", "machine.nodes[0].cpus"),
        set("machine.nodes.0.cpus=\"0-1\"", "machine.nodes"),
        set("machine.nodes.0.adistance=-1", "machine.nodes[0].adistance"),
        set(
            "machine.nodes.0.reserved_mib=1024",
            "machine.nodes[0].reserved_mib",
        ),
        set(
            "machine.nodes.0.boot_pcp_count=[1,1,1,1,1]",
            "machine.nodes[0].boot_pcp_count",
        ),
        set(
            "machine.nodes.0.kswapd_cpu=99",
            "machine.nodes[0].kswapd_cpu",
        ),
        set("machine.nodes.0.speed=1", "machine.nodes[0].speed"),
        // --- [[machine.swap]] ---
        set("machine.swap=[{size_mib=0}]", "machine.swap[0].size_mib"),
        set(
            "machine.swap=[{size_mib=64, kind=\"tape\"}]",
            "machine.swap[0].kind",
        ),
        set(
            "machine.swap=[{size_mib=64, bandwidth_gbps=0}]",
            "machine.swap[0].bandwidth_gbps",
        ),
        set(
            "machine.swap=[{size_mib=64, read_latency_us=1e300}]",
            "machine.swap[0].read_latency_us",
        ),
        set(
            "machine.swap=[{size_mib=64, write_latency_us=nan}]",
            "machine.swap[0].write_latency_us",
        ),
        set(
            "machine.swap=[{size_mib=64, compression_ratio=0.5}]",
            "machine.swap[0].compression_ratio",
        ),
        set(
            "machine.swap=[{size_mib=64, priority=40000}]",
            "machine.swap[0].priority",
        ),
        set(
            "machine.swap=[{size_mib=1},{size_mib=1},{size_mib=1},{size_mib=1},{size_mib=1}]",
            "machine.swap",
        ),
        // --- [vm] ---
        set("vm.min_free_kbytes=1e8", "vm.min_free_kbytes"),
        set("vm.min_free_kbytes=-1", "vm.min_free_kbytes"),
        set("vm.watermark_scale_factor=0", "vm.watermark_scale_factor"),
        set(
            "vm.watermark_scale_factor=3001",
            "vm.watermark_scale_factor",
        ),
        set("vm.swappiness=201", "vm.swappiness"),
        set("vm.page_cluster=32", "vm.page_cluster"),
        set(
            "vm.percpu_pagelist_high_fraction=7",
            "vm.percpu_pagelist_high_fraction",
        ),
        set("vm.demote_scale_factor=10001", "vm.demote_scale_factor"),
        set("vm.pcp_series=\"patch11\"", "vm.pcp_series"),
        set(
            "vm.transparent_hugepage_enabled=\"sometimes\"",
            "vm.transparent_hugepage_enabled",
        ),
        set("vm.lru_gen_min_ttl_ms=-1", "vm.lru_gen_min_ttl_ms"),
        set("vm.swapiness=1", "vm.swapiness"),
        // --- [kernel], [x86], [arch], [debug] ---
        set("kernel.numa_balancing=5", "kernel.numa_balancing"),
        set(
            "kernel.numa_balancing_scan_size_mb=0",
            "kernel.numa_balancing_scan_size_mb",
        ),
        set(
            "kernel.numa_balancing_scan_period_min_ms=70000",
            "kernel.numa_balancing_scan_period_max_ms",
        ),
        set(
            "kernel.numa_balancing_promote_rate_limit_MBps=-1",
            "kernel.numa_balancing_promote_rate_limit_MBps",
        ),
        set("kernel.tiering_policy=\"nope\"", "kernel.tiering_policy"),
        set("kernel.migrc=\"maybe\"", "kernel.migrc"),
        set(
            "kernel.sched_base_slice_ns=-1",
            "kernel.sched_base_slice_ns",
        ),
        set(
            "x86.tlb_single_page_flush_ceiling=-1",
            "x86.tlb_single_page_flush_ceiling",
        ),
        set("x86.l1tf=\"on\"", "x86.l1tf"),
        set("arch.asid_bits=12", "arch.asid_bits"),
        set("debug.migrc_break=\"all\"", "debug.migrc_break"),
        // --- [sim] ---
        set("sim.max_seconds=-1", "sim.max_seconds"),
        set("sim.max_seconds=1e7", "sim.max_seconds"),
        set("sim.max_seconds=nan", "sim.max_seconds"),
        set("sim.quantum_ns=0", "sim.quantum_ns"),
        set("sim.quantum_ns=1e300", "sim.quantum_ns"),
        set("sim.timeline_interval_ms=0", "sim.timeline_interval_ms"),
        set("sim.timeline_interval_ms=inf", "sim.timeline_interval_ms"),
        set("sim.check=\"always\"", "sim.check"),
        // --- [cost] ---
        set("cost.dsb_ish_base_ns=-1", "cost.dsb_ish_base_ns"),
        set("cost.dsb_ish_per_cpu_ns=nan", "cost.dsb_ish_per_cpu_ns"),
        set("cost.zram_compress_ns=inf", "cost.zram_compress_ns"),
        set("cost.zram_decompress_ns=1e300", "cost.zram_decompress_ns"),
        set("cost.migrate_copy_gbps=inf", "cost.migrate_copy_gbps"),
        set("cost.stlb_hit_cycles=-1", "cost.stlb_hit_cycles"),
        set("cost.free_lunch_cycles=0", "cost.free_lunch_cycles"),
        set(
            "cost.anon_fault_cycles=4294967295",
            "cost.anon_fault_cycles",
        ),
        set(
            "cost.file_major_fault_ns=4294967295",
            "cost.file_major_fault_ns",
        ),
        set("workload.compute_cycles_per_nuclide=4294967295", "--yes"),
        set_on(HOT, "workload.phases.2.gap_cycles=4294967295", "--yes"),
        set_on(HOT, "workload.loops=1000000000000", "--yes"),
        // --- [workload], XSBench ---
        set("workload.type=\"nope\"", "workload.type"),
        set("workload.particles=1000000000000", "--yes"),
        set("workload.threads=0", "workload.threads"),
        set("workload.threads=100000", "workload.threads"),
        set("workload.scale=0", "workload.scale"),
        set("workload.scale=1000", "workload.scale"),
        set("workload.scale=nan", "workload.scale"),
        set(
            "workload.lookups_per_particle=0",
            "workload.lookups_per_particle",
        ),
        set("workload.gridpoints=1", "workload.gridpoints"),
        set("workload.size=\"huge\"", "workload.size"),
        set("workload.placement=\"wherever\"", "workload.placement"),
        // --- [workload], scripted ---
        set_on(
            HOT,
            "workload.phases.2.duration_ms=1e300",
            "workload.phases[2]",
        ),
        set_on(
            HOT,
            "workload.phases.2.duration_ms=1e13",
            "workload.phases[2]",
        ),
        set_on(HOT, "workload.phases.2.rate_per_s=0", "workload.phases[2]"),
        set_on(HOT, "workload.phases.2.zipf_s=-1", "workload.phases[2]"),
        set_on(
            HOT,
            "workload.phases.0.kind=\"teleport\"",
            "workload.phases[0]",
        ),
        set_on(
            HOT,
            "workload.phases.2={kind=\"sleep\", ms=1e13}",
            "workload.phases[2]",
        ),
        set_on(
            HOT,
            "workload.phases.2={kind=\"sleep\", ms=-1}",
            "workload.phases[2]",
        ),
        set_on(
            HOT,
            "workload.phases.2={kind=\"fork\", count=100000000}",
            "workload.phases[2]",
        ),
        set_on(HOT, "workload.threads=0", "workload.threads"),
        set_on(HOT, "workload.loops=0", "workload.loops"),
        set_on(
            HOT,
            "workload.phases.2={kind=\"random\", region=\"hot\", count=100000000000000}",
            "--yes",
        ),
        // --- --set syntax ---
        set("novalue", "expected key=value"),
        set("=5", "empty key segment"),
        set("vm..swappiness=1", "empty key segment"),
        set("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q=1", "at most 16"),
        set("machine.nodes.5.cpus=\"1\"", "machine.nodes[5]"),
        set("machine.nodes.x.cpus=\"1\"", "machine.nodes.x"),
        set("machine.cpus.x=1", "machine.cpus"),
        set(&deep_value, "`a`"),
        // --- command-line arguments ---
        cli(&["bench", XS, "--repeat", "0"], &["--repeat"]),
        cli(&["bench", XS, "--repeat", "100000"], &["--repeat"]),
        cli(&["validate", HOT, "--seeds", "0"], &["--seeds"]),
        // --refit reruns the recorded gap search: only with --replay, and on a validate file.
        cli(&["validate", HOT, "--refit"], &["--replay"]),
        cli(&["validate", "--replay", "--refit", HOT], &[HOT]),
        // A replay writes one file: of one recorded file, to a path that can be written.
        cli(
            &["validate", "--replay", HOT, HOT, "--json", "target/x.json"],
            &["--json takes one file"],
        ),
        cli(
            &[
                "validate",
                "--replay",
                HOT,
                "--json",
                "/nonexistent/dir/x.json",
            ],
            &["--json /nonexistent/dir/x.json"],
        ),
        cli(
            &["validate", HOT, "--trace-buffer-kib", "1"],
            &["--trace-buffer-kib"],
        ),
        cli(
            &["compare", XS, "--set", "vm.swappiness=900"],
            &[XS, "--set", "vm.swappiness"],
        ),
        cli(&["compare", XS, "--variant", "nolabel"], &["--variant"]),
        cli(
            &["run", "scenarios/no-such-file.toml"],
            &["no-such-file.toml", "cannot read"],
        ),
        // Below the machine's memory but above what the workload leaves: the OOM names it.
        cli(
            &["run", XS, "--quiet", "--set", "vm.min_free_kbytes=1000000"],
            &[XS, "out of memory", "vm.min_free_kbytes"],
        ),
        cli(
            &["run", "/dev/zero", "--quiet"],
            &["/dev/zero", "larger than 64 MiB"],
        ),
        cli(
            &["run", "scenarios", "--quiet"],
            &["scenarios", "directory"],
        ),
    ];

    // --- files: scenarios and presets this test writes ---
    let with = |name: &str, text: &str| write(dir, name, text.as_bytes());
    r.push(file(
        &write(dir, "binary.toml", &[0xff, 0xfe, 0x00, 0x80]),
        &["UTF-8"],
    ));
    r.push(file(
        &with("syntax.toml", "[machine\ncpus = 4\n"),
        &["line 1"],
    ));
    r.push(file(
        &with(
            "deep.toml",
            &format!("a = {}{}", "[".repeat(30_000), "]".repeat(30_000)),
        ),
        &["recursion limit"],
    ));
    r.push(file(
        &with("nomachine.toml", "[workload]\ntype = \"xsbench\"\n"),
        &["machine"],
    ));
    r.push(file(
        &with(
            "noworkload.toml",
            &VALID.replace("[workload]\ntype = \"xsbench\"", "[workload]"),
        ),
        &["workload.type"],
    ));
    r.push(file(
        &with(
            "nolatency.toml",
            &VALID.replace("read_latency_ns = 100\n", ""),
        ),
        &["machine.nodes[0].read_latency_ns", "missing"],
    ));
    r.push(file(
        &with(
            "badlat.toml",
            &VALID.replace("read_latency_ns = 100", "read_latency_ns = 1e300"),
        ),
        &["machine.nodes[0].read_latency_ns", "1e300", "1000000"],
    ));
    r.push(file(
        &with(
            "cpus.toml",
            &VALID.replace("cpus = \"0-3\"", "cpus = \"0-4294967295\""),
        ),
        &["machine.nodes[0].cpus", "4294967295"],
    ));
    r.push(file(
        &with(
            "sleep.toml",
            &VALID.replace("particles = 100", "particles = -1"),
        ),
        &["workload.particles"],
    ));
    // Presets: missing, endless, a directory, without [machine], with a bad value, clashing.
    let preset = |name: &str, preset: &str| {
        with(name, &format!("machine_preset = \"{preset}\"\n{}", VALID.replace("[[machine.nodes]]\ncapacity_mib = 1024\nread_latency_ns = 100\nwrite_latency_ns = 100\ncpus = \"0-3\"\n", "")))
    };
    r.push(file(
        &preset("p-missing.toml", "no-such-preset.toml"),
        &["machine_preset", "no-such-preset.toml"],
    ));
    r.push(file(
        &preset("p-zero.toml", "/dev/zero"),
        &["machine_preset", "larger than 64 MiB"],
    ));
    r.push(file(
        &preset("p-dir.toml", "/"),
        &["machine_preset", "directory"],
    ));
    with("nomach-preset.toml", "[vm]\nswappiness = 1\n");
    r.push(file(
        &preset("p-nomach.toml", "nomach-preset.toml"),
        &["nomach-preset.toml", "[machine]"],
    ));
    with(
        "lat-preset.toml",
        "[machine]\ncpus = 4\n[[machine.nodes]]\ncapacity_mib = 1024\nread_latency_ns = -1\nwrite_latency_ns = 100\ncpus = \"0-3\"\n",
    );
    r.push(file(
        &preset("p-lat.toml", "lat-preset.toml"),
        &[
            "lat-preset.toml",
            "machine_preset of",
            "machine.nodes[0].read_latency_ns",
        ],
    ));
    with(
        "clash-preset.toml",
        "[machine]\ncpus = 16\n[[machine.nodes]]\ncapacity_mib = 1024\nread_latency_ns = 100\nwrite_latency_ns = 100\ncpus = \"0-15\"\n",
    );
    r.push(file(
        &preset("p-clash.toml", "clash-preset.toml"),
        &[
            "clash-preset.toml",
            "machine_preset of",
            "machine.nodes[0].cpus",
            "CPU 4",
        ],
    ));
    r
}

#[test]
fn every_bad_input_ends_quickly_with_an_error_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("tierlab-bad-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let rows = rows(&dir);
    assert!(rows.len() >= 160, "{} rows", rows.len());
    let mut failures = Vec::new();
    for row in &rows {
        let (code, err) = run(&row.args);
        let mut why = Vec::new();
        // 1: tierlab's errors; 2: clap's usage errors. None: killed by a signal (abort).
        if !matches!(code, Some(1 | 2)) {
            why.push(format!("exit code {code:?} (a signal or abort if None)"));
        }
        for bad in [
            "panicked",
            "memory allocation",
            "overflowed its stack",
            "RUST_BACKTRACE",
        ] {
            if err.contains(bad) {
                why.push(format!("stderr says `{bad}`"));
            }
        }
        for n in &row.needles {
            if !err.contains(n.as_str()) {
                why.push(format!("stderr lacks `{n}`"));
            }
        }
        if !why.is_empty() {
            let args: Vec<String> = row
                .args
                .iter()
                .map(|a| a.chars().take(100).collect())
                .collect();
            let err: String = err.chars().take(400).collect();
            failures.push(format!("{args:?}: {}\n    stderr: {err}", why.join("; ")));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}
