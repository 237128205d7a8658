//! A scenario's TOML text → typed config → validated → workload planned, sized and its
//! footprint estimated (never simulated). Any panic, abort or hang here is a bug: bad input
//! must end in a ConfigError.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierlab::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A preset is read relative to the scenario: point it at the shipped machines only, so
    // the fuzzer cannot make every run read /dev/zero (config_file covers file reads).
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let Ok(cfg) = Config::from_str_with(text, "fuzz.toml", Some(&base), &[]) else {
        return;
    };
    if let Ok(_plan) = workloads::build(&cfg, "fuzz.toml") {
        let _ = workloads::estimate::estimate(&cfg);
        let _ = workloads::estimate::footprint_pages(&cfg);
    }
});
