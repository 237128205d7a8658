//! A scenario or machine preset as a file on disk: the bounded read, UTF-8 and TOML checks,
//! then (as a preset named by a shipped scenario) the merge into a scenario.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use tierlab::config::read_table;
use tierlab::Config;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("tierlab-fuzz-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let preset = dir.join("preset.toml");
    let Ok(mut f) = std::fs::File::create(&preset) else {
        return;
    };
    if f.write_all(data).is_err() {
        return;
    }
    drop(f);
    let _ = read_table(&preset);
    let scenario = "machine_preset = \"preset.toml\"\n[machine]\ncpus = 4\n\
                    [workload]\ntype = \"xsbench\"\nsize = \"small\"\nthreads = 4\nparticles = 10\n";
    if let Ok(cfg) = Config::from_str_with(scenario, "s.toml", Some(&dir), &[]) {
        let _ = workloads::build(&cfg, "s.toml");
    }
});
