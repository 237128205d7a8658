//! Where the regions live: each `[[workload.regions]]` entry laid out at a fixed address (file
//! regions also get a file), and `[[workload.watch]]` sub-ranges for the timeline.

use std::collections::HashMap;

use tierlab::config::ConfigError;
use tierlab::workload::{prot, Backing, FileSpec, RegionSpec};

use super::config::{parse_prot, RegionCfg, WatchCfg};
use super::plan::Region;
use super::{Keyed, PAGE};

/// First region address; regions are 2 MiB aligned with at least 2 MiB between them.
pub(super) const BASE: u64 = 0x1000_0000;
pub(super) const ALIGN: u64 = 2 << 20;
/// Regions end below the stacks at the top of the simulated address space (2^44).
const LIMIT: u64 = super::process_image::REGIONS_END;

/// Lay the regions out in definition order; `nodes` is the machine's node count.
pub(super) fn lay_out(
    cfgs: &[RegionCfg],
    nodes: u32,
    origin: &str,
) -> Result<(Vec<Region>, Vec<FileSpec>), ConfigError> {
    let e = Keyed(origin);
    let mut regions: Vec<Region> = Vec::new();
    let mut files: Vec<FileSpec> = Vec::new();
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    let mut next = BASE;
    for (i, r) in cfgs.iter().enumerate() {
        let key = |k: &str| format!("workload.regions[{i}].{k}");
        if by_name.insert(r.name.as_str(), i).is_some() {
            return Err(e.at(key("name"), format!("duplicate region name {:?}", r.name)));
        }
        let (field, pages) = match (r.size_mib, r.size_kib, r.pages) {
            (Some(m), None, None) => ("size_mib", m.checked_mul(256)),
            (None, Some(k), None) => {
                if k % 4 != 0 {
                    return Err(e.at(key("size_kib"), "must be a multiple of 4 (whole pages)"));
                }
                ("size_kib", Some(k / 4))
            }
            (None, None, Some(p)) => ("pages", Some(p)),
            _ => {
                return Err(e.at(
                    format!("workload.regions[{i}]"),
                    "exactly one of size_mib / size_kib / pages is required",
                ))
            }
        };
        let pages = match pages {
            Some(0) => return Err(e.at(key(field), "region size must be > 0")),
            Some(p) if p < LIMIT / PAGE => p,
            _ => return Err(e.at(key(field), "region too large")),
        };
        let prot = match &r.prot {
            None => prot::READ | prot::WRITE,
            Some(s) => parse_prot(s).ok_or_else(|| {
                e.at(
                    key("prot"),
                    format!("unknown prot {s:?} (expected none, r, rw, rx, rwx)"),
                )
            })?,
        };
        let backing = match r.kind.as_deref().unwrap_or("anon") {
            "anon" => Backing::Anon,
            kind @ ("file" | "shmem") => {
                files.push(FileSpec {
                    name: r.name.clone(),
                    pages,
                    shmem: kind == "shmem",
                });
                Backing::File {
                    file: files.len() as u32 - 1,
                    pgoff: 0,
                }
            }
            other => {
                return Err(e.at(
                    key("kind"),
                    format!("unknown region kind {other:?} (expected anon, file or shmem)"),
                ))
            }
        };
        if let Some(n) = r.node {
            if n >= nodes {
                return Err(e.at(
                    key("node"),
                    format!("missing node {n} (the machine has {nodes} nodes)"),
                ));
            }
        }
        let start = next;
        let end = start + pages * PAGE;
        if end > LIMIT {
            return Err(e.at(
                key(field),
                format!("regions do not fit below {LIMIT:#x} (the stacks are above)"),
            ));
        }
        next = (end + ALIGN).div_ceil(ALIGN) * ALIGN;
        regions.push(Region {
            name: r.name.clone(),
            start,
            pages,
            prot,
            backing,
            shmem: r.kind.as_deref() == Some("shmem"),
            node: r.node,
        });
    }
    Ok((regions, files))
}

/// The regions, then the watched sub-ranges, as the timeline reports them.
pub(super) fn specs(
    regions: &[Region],
    watch: &[WatchCfg],
    origin: &str,
) -> Result<Vec<RegionSpec>, ConfigError> {
    let e = Keyed(origin);
    let mut region_specs: Vec<RegionSpec> = regions
        .iter()
        .map(|r| RegionSpec {
            name: r.name.clone(),
            process: 0,
            start: r.start,
            len: r.pages * PAGE,
        })
        .collect();
    for (i, w) in watch.iter().enumerate() {
        let key = |k: &str| format!("workload.watch[{i}].{k}");
        let Some(r) = regions.iter().find(|r| r.name == w.region) else {
            return Err(e.at(key("region"), format!("unknown region '{}'", w.region)));
        };
        let pages = w.pages.unwrap_or(r.pages.saturating_sub(w.offset_pages));
        if pages == 0 || w.offset_pages + pages > r.pages {
            return Err(e.at(
                key("pages"),
                format!(
                    "pages {}..{} are outside region '{}' ({} pages)",
                    w.offset_pages,
                    w.offset_pages + pages,
                    r.name,
                    r.pages
                ),
            ));
        }
        region_specs.push(RegionSpec {
            name: w.name.clone(),
            process: 0,
            start: r.start + w.offset_pages * PAGE,
            len: pages * PAGE,
        });
    }
    Ok(region_specs)
}

/// The report line of a region.
pub(super) fn describe(r: &Region) -> String {
    format!(
        "{} {} KiB {} at {:#x}{}",
        r.name,
        r.pages * 4,
        match r.backing {
            Backing::Anon => "anon",
            _ if r.shmem => "shmem",
            _ => "file",
        },
        r.start,
        r.node
            .map(|n| format!(" bound to node {n}"))
            .unwrap_or_default()
    )
}
