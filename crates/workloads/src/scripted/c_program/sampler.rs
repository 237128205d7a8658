//! What the sampler reports: the watched sub-ranges, the vmstat counters, the node meminfo
//! fields, the node count and
//! the interval (the regions themselves are in `REGIONS`), and the `/proc/zoneinfo` reader.

use std::fmt::Write;

use super::super::Resolved;
use super::{c_str, json_c_str, pages, table, CProgramOptions};

/// The sampler's `/proc/zoneinfo` reader, declared in the runtime and defined after it.
const ZONEINFO: &str = include_str!("zoneinfo.c");

/// `WATCHES`, `COUNTERS`, `END_COUNTERS`, `NODE_MEMINFO` (when there are fields), `NNODES`
/// and `SAMPLE_MS`, and the zoneinfo reader.
pub(super) fn tables(out: &mut String, r: &Resolved, opts: &CProgramOptions) {
    out.push_str(ZONEINFO);
    // `region_specs` lists the regions, then the watched sub-ranges in `cfg.watch` order.
    let watched = &r.region_specs[r.regions.len()..];
    let rows: Vec<String> = watched
        .iter()
        .zip(&r.cfg.watch)
        .map(|(spec, w)| {
            let (i, region) = r
                .regions
                .iter()
                .enumerate()
                .find(|(_, g)| g.name == w.region)
                .expect("regions::specs checked the watched region");
            format!(
                "\t{{.name = {}, .region = {i}, .offset = {}ULL, .pages = {}ULL}},",
                json_c_str(&spec.name),
                pages(spec.start - region.start),
                pages(spec.len)
            )
        })
        .collect();
    table(out, "const struct watch WATCHES[]", &rows);
    let _ = writeln!(out, "const int NWATCHES = {};", rows.len());
    names(out, "COUNTERS", &opts.counters);
    names(out, "END_COUNTERS", &opts.end_counters);
    if !opts.node_meminfo.is_empty() {
        names(out, "NODE_MEMINFO", &opts.node_meminfo);
    }
    let _ = writeln!(out, "const int NNODES = {};", opts.nodes);
    let _ = writeln!(
        out,
        "const double SAMPLE_MS = {:?};\n",
        opts.sample_interval_ms
    );
}

/// `const char *const NAME[]` and `const int NNAME` for a list of names. The array ends in a
/// null, so that an empty list is still an array (C has no empty initializer for it).
fn names(out: &mut String, name: &str, list: &[String]) {
    let _ = writeln!(out, "const char *const {name}[] = {{");
    for n in list {
        let _ = writeln!(out, "\t{},", c_str(n));
    }
    out.push_str("\tNULL,\n};\n");
    let _ = writeln!(out, "const int N{name} = {};", list.len());
}
