//! `--set` assignments (one a line) applied to a shipped scenario, then validated and the
//! workload planned, as `tierlab run --set ...` does before it simulates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tierlab::Config;

const BASE: &str = include_str!("../../scenarios/xsbench-small.toml");
const SCRIPTED: &str = include_str!("../../scenarios/validate/hot_small.toml");

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (scripted, text) = match text.strip_prefix('#') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let sets: Vec<String> = text.lines().map(str::to_string).collect();
    let base = if scripted { SCRIPTED } else { BASE };
    let Ok(cfg) = Config::from_str_with(base, "base.toml", None, &sets) else {
        return;
    };
    if let Ok(_plan) = workloads::build(&cfg, "base.toml") {
        let _ = workloads::estimate::estimate(&cfg);
        let _ = workloads::estimate::footprint_pages(&cfg);
    }
});
