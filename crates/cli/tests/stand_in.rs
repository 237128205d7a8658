//! A `validate` stand-in run (`machine.vcpu_turns`) as the command line runs it: its results
//! are the simulated kernel's, not those of tierlab's own sampling.

mod common;
use common::{repo, tierlab};

/// `hot_4t_busy`'s recorded stand-in, run with tierlab's timeline sampled every `sample_ms`:
/// the vmstat counters and the simulated length of the run.
fn stand_in_run(sample_ms: &str) -> (serde_json::Value, serde_json::Value) {
    let sets_file = repo().join("crates/cli/tests/data/hot_4t_busy_stand_in.sets");
    let text = std::fs::read_to_string(sets_file).unwrap();
    let out = std::env::temp_dir().join(format!(
        "tierlab-stand-in-{sample_ms}-{}.json",
        std::process::id()
    ));
    let interval = format!("sim.timeline_interval_ms={sample_ms}");
    let mut args = vec!["run", "scenarios/validate/hot_4t_busy.toml", "--quiet"];
    for set in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        args.extend(["--set", set]);
    }
    args.extend(["--set", &interval, "--json", out.to_str().unwrap()]);
    let o = tierlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).ok();
    (doc["vmstat"].clone(), doc["sim_seconds"].clone())
}

#[test]
fn a_stand_ins_run_does_not_depend_on_how_often_tierlab_samples_it() {
    // Its four readers never sleep, so for 500 ms at a time tierlab's samples were the only
    // events delivered, and the kernel's `now` stayed at the last one: a kswapd woken from a
    // reader's hint fault was scheduled there, up to a sample back, and the turns' clock went
    // back with it. Sampled every 5 ms the run promoted 2,057 pages and ended at 5.56 s,
    // every 500 ms 2,549 and 4.91 s. kswapd's step now comes at its waker's clock.
    let (fine, fine_end) = stand_in_run("5");
    assert!(fine["pgdemote_kswapd"].as_u64().unwrap() > 0, "{fine}");
    let (coarse, coarse_end) = stand_in_run("500");
    assert_eq!(fine, coarse);
    assert_eq!(fine_end, coarse_end);
}
