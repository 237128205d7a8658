//! The `tierlab` binary: runs, JSON output, and errors that name the file and key.

mod common;
use common::tierlab;

#[test]
fn run_prints_a_summary_and_writes_json() {
    let out_path = std::env::temp_dir().join(format!("tierlab-cli-{}.json", std::process::id()));
    let o = tierlab(&[
        "run",
        "scenarios/xsbench-small.toml",
        "--set",
        "workload.particles=100",
        "--json",
        out_path.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for needle in [
        "dTLB-load-misses",
        "pgfault",
        "TLB shootdowns",
        "Lookups/s:",
        "0 violations",
    ] {
        assert!(stdout.contains(needle), "summary lacks {needle}:\n{stdout}");
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(doc["workload"]["lookups"], 3400);
    assert_eq!(doc["check"]["violations"], 0);
    let _ = std::fs::remove_file(out_path);
}

#[test]
fn config_errors_name_the_file_and_key() {
    let o = tierlab(&[
        "run",
        "scenarios/xsbench-small.toml",
        "--set",
        "vm.watermark_scale_factor=0",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("scenarios/xsbench-small.toml") && err.contains("vm.watermark_scale_factor"),
        "{err}"
    );

    let o = tierlab(&[
        "run",
        "scenarios/xsbench-small.toml",
        "--set",
        "machine.nodes=3",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("machine.nodes"));

    let o = tierlab(&["run", "no/such/file.toml"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no/such/file.toml"));
}

#[test]
fn malformed_toml_reports_the_line() {
    let p = std::env::temp_dir().join(format!("tierlab-bad-{}.toml", std::process::id()));
    std::fs::write(&p, "[machine]\ncpus = = 3\n").unwrap();
    let o = tierlab(&["run", p.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 2"), "{err}");
    let _ = std::fs::remove_file(p);
}

#[test]
fn scripted_swap_bench_prints_phase_timings_and_the_no_swap_note() {
    let o = tierlab(&[
        "run",
        "scenarios/swap_bench.toml",
        "--set",
        "workload.loop.0.times=50",
        "--set",
        "machine.swap=[]",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("Phases (simulated time):"), "{stdout}");
    assert!(
        stdout.contains("pageout") && stdout.contains("over 50 run(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("MADV_PAGEOUT left") && stdout.contains("no swap device"),
        "{stdout}"
    );
}

#[test]
fn an_unknown_arch_is_refused_naming_the_key_and_the_accepted_ones() {
    let o = tierlab(&[
        "run",
        "scenarios/xsbench-small.toml",
        "--set",
        "machine.arch=\"riscv\"",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("machine.arch") && err.contains("\"x86\"") && err.contains("\"arm64\""),
        "{err}"
    );
}

#[test]
fn reproduce_list_names_every_reproduction() {
    let o = tierlab(&["reproduce", "--list"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for needle in ["migrc", "seed 000", "tpp", "seed 003"] {
        assert!(stdout.contains(needle), "--list lacks {needle}:\n{stdout}");
    }

    let o = tierlab(&["reproduce", "no-such-seed"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("migrc") && err.contains("tpp"), "{err}");
}

#[test]
fn validate_refuses_a_bad_trace_request_before_booting() {
    let stderr = |o: std::process::Output| {
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let uniform = "scenarios/validate/uniform.toml";
    let e = stderr(tierlab(&[
        "validate",
        uniform,
        "--trace",
        "vmscan",
        "--trace-out",
        "/tmp/never.trace",
    ]));
    assert!(e.contains("--trace \"vmscan\""), "{e}");
    let e = stderr(tierlab(&[
        "validate",
        uniform,
        uniform,
        "--trace",
        "vmscan/mm_vmscan_kswapd_wake",
        "--trace-out",
        "/tmp/never.trace",
    ]));
    assert!(e.contains("--trace-out takes one scenario"), "{e}");
    let e = stderr(tierlab(&[
        "validate",
        uniform,
        "--trace",
        "vmscan/mm_vmscan_kswapd_wake",
        "--trace-out",
        "/nonexistent-dir/x.trace",
    ]));
    assert!(e.contains("--trace-out /nonexistent-dir/x.trace"), "{e}");
    let e = stderr(tierlab(&["validate", uniform, "--trace", "vmscan/x"]));
    assert!(e.contains("--trace-out"), "{e}");
    // Ring buffers: 64 KiB to 64 MiB per CPU.
    let e = stderr(tierlab(&[
        "validate",
        uniform,
        "--trace-buffer-kib",
        "1000000",
    ]));
    assert!(e.contains("--trace-buffer-kib"), "{e}");
}
