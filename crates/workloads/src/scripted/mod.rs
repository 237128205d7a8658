//! `type = "scripted"`: the small C micro-benchmarks kernel developers write (swap_bench,
//! swap-young.c, ...) described as a list of regions and a list of phases in TOML.
//!
//! Program shape (every thread runs the same program; phases are sequential, like C programs
//! separated by pthread barriers):
//!
//! 1. thread 0 maps every region (`Op::Mmap`), then every thread emits `Op::Barrier`;
//! 2. for each phase instance, every *participating* thread emits `Mark(Phase(id))`, the phase's
//!    ops and `Mark(Work(n))` (n = its accesses in that phase, omitted when 0); then *every*
//!    thread emits `Op::Barrier`;
//! 3. every thread emits `Op::Exit`.
//!
//! The phase list runs in definition order, `loops` times. A `[[workload.loop]]` entry repeats a
//! list of phases (by name) `times` times; the group runs at the position of its earliest
//! member in the phase list, and its members are not also run on their own. Loop iterations
//! reuse the phase ids, so per-phase totals accumulate.
//!
//! Region binding (`node` on a region) is approximated: the region is first-touched wherever the
//! kernel puts it, and after each `touch` phase of that region the lowest participating thread
//! emits `Op::MovePages` of the whole region to `node` (an mbind(MPOL_MF_MOVE) after the fact).
//!
//! Streams are generated lazily, ~1024 ops per `refill`; only a `touch` phase's random
//! permutation and a Zipf phase's CDF are precomputed (once per phase, shared by all threads).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{
    advice, prot, Backing, FileSpec, Mark, Op, Placement, RegionSpec, ThreadSpec, ThreadStream,
    Workload,
};

const PAGE: u64 = 4096;
/// First region address; regions are 2 MiB aligned with at least 2 MiB between them.
const BASE: u64 = 0x1000_0000;
const ALIGN: u64 = 2 << 20;
const LIMIT: u64 = 1 << 44;
const CHUNK: usize = 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cfg {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    #[serde(default = "one")]
    threads: u32,
    placement: Option<PlacementCfg>,
    #[serde(default = "one")]
    processes: u32,
    #[serde(default = "one64")]
    loops: u64,
    #[serde(default)]
    regions: Vec<RegionCfg>,
    #[serde(default)]
    phases: Vec<PhaseCfg>,
    #[serde(default, rename = "loop")]
    groups: Vec<LoopCfg>,
    /// Sub-ranges of regions whose per-node residency the timeline also reports.
    #[serde(default)]
    watch: Vec<WatchCfg>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchCfg {
    name: String,
    region: String,
    #[serde(default)]
    offset_pages: u64,
    pages: Option<u64>,
}

fn one() -> u32 {
    1
}
fn one64() -> u64 {
    1
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PlacementCfg {
    Named(String),
    Cpus(Vec<u32>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegionCfg {
    name: String,
    size_mib: Option<u64>,
    size_kib: Option<u64>,
    pages: Option<u64>,
    kind: Option<String>,
    prot: Option<String>,
    node: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseCfg {
    name: Option<String>,
    kind: String,
    region: Option<String>,
    threads: Option<Vec<u32>>,
    offset_pages: Option<u64>,
    pages: Option<u64>,
    write: Option<bool>,
    write_fraction: Option<f64>,
    order: Option<String>,
    distribution: Option<String>,
    zipf_s: Option<f64>,
    hot: Option<String>,
    count: Option<u64>,
    duration_ms: Option<f64>,
    rate_per_s: Option<f64>,
    gap_cycles: Option<u32>,
    stride_bytes: Option<u64>,
    advice: Option<String>,
    node: Option<u32>,
    prot: Option<String>,
    ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoopCfg {
    times: u64,
    phases: Vec<String>,
}

/// Error helper: "origin: key `key`: message".
struct Keyed<'a>(&'a str);
impl Keyed<'_> {
    fn at(&self, key: impl Display, msg: impl Display) -> ConfigError {
        ConfigError::key(self.0, key, msg)
    }
}

fn parse_prot(s: &str) -> Option<u8> {
    Some(match s {
        "none" => 0,
        "r" => prot::READ,
        "rw" => prot::READ | prot::WRITE,
        "rx" => prot::READ | prot::EXEC,
        "rwx" => prot::READ | prot::WRITE | prot::EXEC,
        _ => return None,
    })
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn mix(seed: u64, salt: u64, n: u64) -> u64 {
    splitmix(splitmix(seed ^ salt).wrapping_add(n))
}

struct Region {
    name: String,
    start: u64,
    pages: u64,
    prot: u8,
    backing: Backing,
    node: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
enum Writes {
    Never,
    Always,
    Fraction(f64),
}

enum Pattern {
    Seq,
    Rev,
    Perm(Arc<[u32]>),
    Stride {
        bytes: u64,
        count: u64,
    },
    Uniform {
        count: u64,
    },
    Zipf {
        count: u64,
        cdf: Arc<[f64]>,
        hot_last: bool,
    },
}

struct Access {
    start: u64,
    pages: u64,
    pattern: Pattern,
    writes: Writes,
    pace: Option<u32>,
    gap: Option<u32>,
}

impl Access {
    fn count(&self) -> u64 {
        match &self.pattern {
            Pattern::Seq | Pattern::Rev => self.pages,
            Pattern::Perm(p) => p.len() as u64,
            Pattern::Stride { count, .. }
            | Pattern::Uniform { count }
            | Pattern::Zipf { count, .. } => *count,
        }
    }
}

enum Body {
    Nothing,
    Op(Op),
    Access(Access),
}

struct PhasePlan {
    id: u32,
    participants: Vec<bool>,
    body: Body,
    /// Emitted by thread `lead` at the end of the phase (region binding).
    after: Option<Op>,
    lead: u32,
}

struct Step {
    members: Vec<usize>,
    times: u64,
}

struct Program {
    prologue: Vec<Op>,
    phases: Vec<PhasePlan>,
    steps: Vec<Step>,
    loops: u64,
}

/// The per-thread state machine.
struct Stream {
    prog: Arc<Program>,
    tid: u32,
    rng: ChaCha8Rng,
    started: bool,
    done: bool,
    outer: u64,
    step: usize,
    rep: u64,
    member: usize,
    in_phase: bool,
    next: u64,
}

impl Stream {
    fn advance(&mut self) {
        let step = &self.prog.steps[self.step];
        self.member += 1;
        if self.member < step.members.len() {
            return;
        }
        self.member = 0;
        self.rep += 1;
        if self.rep < step.times {
            return;
        }
        self.rep = 0;
        self.step += 1;
        if self.step == self.prog.steps.len() {
            self.step = 0;
            self.outer += 1;
        }
    }

    fn access(&mut self, a: &Access, i: u64, out: &mut Vec<Op>) {
        if let Some(p) = a.pace {
            out.push(Op::Pace(p));
        }
        if let Some(g) = a.gap {
            if i > 0 {
                out.push(Op::Compute(g));
            }
        }
        let addr = match &a.pattern {
            Pattern::Seq => a.start + i * PAGE,
            Pattern::Rev => a.start + (a.pages - 1 - i) * PAGE,
            Pattern::Perm(p) => a.start + p[i as usize] as u64 * PAGE,
            Pattern::Stride { bytes, .. } => a.start + i * bytes,
            Pattern::Uniform { .. } => {
                let page = self.rng.gen_range(0..a.pages);
                a.start + page * PAGE + self.rng.gen_range(0..PAGE / 8) * 8
            }
            Pattern::Zipf { cdf, hot_last, .. } => {
                let u: f64 = self.rng.gen();
                let rank = (cdf.partition_point(|&c| c <= u) as u64).min(a.pages - 1);
                let page = if *hot_last { a.pages - 1 - rank } else { rank };
                a.start + page * PAGE + self.rng.gen_range(0..PAGE / 8) * 8
            }
        };
        let store = match a.writes {
            Writes::Never => false,
            Writes::Always => true,
            Writes::Fraction(f) => self.rng.gen::<f64>() < f,
        };
        out.push(if store {
            Op::Store(addr)
        } else {
            Op::Load(addr)
        });
    }
}

impl ThreadStream for Stream {
    fn refill(&mut self, out: &mut Vec<Op>) {
        if self.done {
            return;
        }
        let prog = Arc::clone(&self.prog);
        let target = out.len() + CHUNK;
        if !self.started {
            if self.tid == 0 {
                out.extend_from_slice(&prog.prologue);
            }
            out.push(Op::Barrier);
            self.started = true;
        }
        while out.len() < target {
            if prog.steps.is_empty() || self.outer >= prog.loops {
                out.push(Op::Exit);
                self.done = true;
                return;
            }
            let phase = &prog.phases[prog.steps[self.step].members[self.member]];
            let part = phase.participants[self.tid as usize];
            if !self.in_phase {
                self.in_phase = true;
                self.next = 0;
                if part {
                    out.push(Op::Mark(Mark::Phase(phase.id)));
                    if let Body::Op(op) = phase.body {
                        out.push(op);
                    }
                }
            }
            if part {
                if let Body::Access(a) = &phase.body {
                    let n = a.count();
                    while self.next < n && out.len() < target {
                        let i = self.next;
                        self.access(a, i, out);
                        self.next += 1;
                    }
                    if self.next < n {
                        return;
                    }
                    let mut left = n;
                    while left > 0 {
                        let w = left.min(u32::MAX as u64);
                        out.push(Op::Mark(Mark::Work(w as u32)));
                        left -= w;
                    }
                }
                if self.tid == phase.lead {
                    if let Some(op) = phase.after {
                        out.push(op);
                    }
                }
            }
            out.push(Op::Barrier);
            self.in_phase = false;
            self.advance();
        }
    }
}

const REGION_KINDS: &[&str] = &[
    "touch",
    "random",
    "stride",
    "madvise",
    "move_pages",
    "mprotect",
    "mmap",
    "munmap",
];

/// Which optional phase keys each kind accepts (name, kind and threads are always accepted).
fn allowed(kind: &str) -> &'static [&'static str] {
    const RANGE: [&str; 3] = ["region", "offset_pages", "pages"];
    match kind {
        "touch" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "order",
            "rate_per_s",
            "gap_cycles",
        ],
        "random" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "write_fraction",
            "distribution",
            "zipf_s",
            "hot",
            "count",
            "duration_ms",
            "rate_per_s",
            "gap_cycles",
        ],
        "stride" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "stride_bytes",
            "rate_per_s",
            "gap_cycles",
        ],
        "madvise" => &["region", "offset_pages", "pages", "advice"],
        "move_pages" => &["region", "offset_pages", "pages", "node"],
        "mprotect" => &["region", "offset_pages", "pages", "prot"],
        "mmap" | "munmap" => &RANGE,
        "sleep" => &["ms"],
        _ => &[],
    }
}

fn present(p: &PhaseCfg) -> [(&'static str, bool); 18] {
    [
        ("region", p.region.is_some()),
        ("offset_pages", p.offset_pages.is_some()),
        ("pages", p.pages.is_some()),
        ("write", p.write.is_some()),
        ("write_fraction", p.write_fraction.is_some()),
        ("order", p.order.is_some()),
        ("distribution", p.distribution.is_some()),
        ("zipf_s", p.zipf_s.is_some()),
        ("hot", p.hot.is_some()),
        ("count", p.count.is_some()),
        ("duration_ms", p.duration_ms.is_some()),
        ("rate_per_s", p.rate_per_s.is_some()),
        ("gap_cycles", p.gap_cycles.is_some()),
        ("stride_bytes", p.stride_bytes.is_some()),
        ("advice", p.advice.is_some()),
        ("node", p.node.is_some()),
        ("prot", p.prot.is_some()),
        ("ms", p.ms.is_some()),
    ]
}

/// Build a scripted workload from the scenario's [workload] table. `origin` is the file name for
/// errors; `nodes` is the machine's node count; `cpus` its CPU count; `cpu_ghz` its clock.
pub fn build(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    nodes: u32,
    cpus: u32,
    cpu_ghz: f64,
) -> Result<Workload, ConfigError> {
    // The clock is not needed: every time-based knob is in simulated ns / ms.
    let _ = cpu_ghz;
    let e = Keyed(origin);
    let cfg: Cfg = typed(toml::Value::Table(table.clone()), origin, "workload")?;
    if cfg.kind != "scripted" {
        return Err(e.at(
            "workload.type",
            format!("expected \"scripted\", got {:?}", cfg.kind),
        ));
    }
    let nthreads = cfg.threads;
    if nthreads == 0 {
        return Err(e.at("workload.threads", "must be at least 1"));
    }
    if cfg.processes != 1 {
        return Err(e.at(
            "workload.processes",
            "scripted workloads support exactly 1 process",
        ));
    }
    if cfg.loops == 0 {
        return Err(e.at("workload.loops", "must be at least 1"));
    }
    let placements: Vec<Placement> = match &cfg.placement {
        None => vec![Placement::Spread; nthreads as usize],
        Some(PlacementCfg::Named(s)) if s == "spread" => vec![Placement::Spread; nthreads as usize],
        Some(PlacementCfg::Named(s)) if s == "pinned" => {
            if nthreads > cpus {
                return Err(e.at(
                    "workload.placement",
                    format!(
                        "\"pinned\" puts thread i on CPU i, but {nthreads} threads > {cpus} CPUs"
                    ),
                ));
            }
            (0..nthreads).map(Placement::Pinned).collect()
        }
        Some(PlacementCfg::Named(s)) => {
            return Err(e.at(
                "workload.placement",
                format!(
                "unknown placement {s:?} (expected \"spread\", \"pinned\" or a list of CPU ids)"
            ),
            ))
        }
        Some(PlacementCfg::Cpus(list)) => {
            if list.len() != nthreads as usize {
                return Err(e.at(
                    "workload.placement",
                    format!("{} CPU ids for {nthreads} threads", list.len()),
                ));
            }
            for (i, &c) in list.iter().enumerate() {
                if c >= cpus {
                    return Err(e.at(
                        format!("workload.placement[{i}]"),
                        format!("CPU {c} does not exist (the machine has {cpus} CPUs)"),
                    ));
                }
            }
            list.iter().map(|&c| Placement::Pinned(c)).collect()
        }
    };

    // Regions.
    let mut regions: Vec<Region> = Vec::new();
    let mut files: Vec<FileSpec> = Vec::new();
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    let mut next = BASE;
    for (i, r) in cfg.regions.iter().enumerate() {
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
            "file" => {
                files.push(FileSpec {
                    name: r.name.clone(),
                    pages,
                });
                Backing::File {
                    file: files.len() as u32 - 1,
                    pgoff: 0,
                }
            }
            other => {
                return Err(e.at(
                    key("kind"),
                    format!("unknown region kind {other:?} (expected anon or file)"),
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
            return Err(e.at(key(field), "regions do not fit below 2^44"));
        }
        next = (end + ALIGN).div_ceil(ALIGN) * ALIGN;
        regions.push(Region {
            name: r.name.clone(),
            start,
            pages,
            prot,
            backing,
            node: r.node,
        });
    }

    // Phases.
    let mut names: Vec<String> = Vec::new();
    let mut phase_ids: HashMap<String, usize> = HashMap::new();
    let mut plans: Vec<PhasePlan> = Vec::new();
    for (i, p) in cfg.phases.iter().enumerate() {
        let key = |k: &str| format!("workload.phases[{i}].{k}");
        let kind = p.kind.as_str();
        if kind != "barrier" && allowed(kind).is_empty() {
            return Err(e.at(
                key("kind"),
                format!(
                    "unknown phase kind {kind:?} (expected touch, random, stride, madvise, \
                     move_pages, mprotect, sleep, barrier, mmap or munmap)"
                ),
            ));
        }
        for (k, set) in present(p) {
            if set && !allowed(kind).contains(&k) {
                return Err(e.at(key(k), format!("not used by a `{kind}` phase")));
            }
        }
        // Region and sub-range.
        let region = if REGION_KINDS.contains(&kind) {
            let name = p
                .region
                .as_deref()
                .ok_or_else(|| e.at(key("region"), format!("a `{kind}` phase needs a region")))?;
            let &ri = by_name
                .get(name)
                .ok_or_else(|| e.at(key("region"), format!("unknown region {name:?}")))?;
            Some(&regions[ri])
        } else {
            None
        };
        let (start, pages) = match region {
            None => (0, 0),
            Some(r) => {
                let off = p.offset_pages.unwrap_or(0);
                if off >= r.pages {
                    return Err(e.at(
                        key("offset_pages"),
                        format!(
                            "offset {off} is outside region {:?} ({} pages)",
                            r.name, r.pages
                        ),
                    ));
                }
                let len = p.pages.unwrap_or(r.pages - off);
                if len == 0 || len > r.pages - off {
                    return Err(e.at(
                        key("pages"),
                        format!(
                            "{len} pages from offset {off} is outside region {:?} ({} pages)",
                            r.name, r.pages
                        ),
                    ));
                }
                (r.start + off * PAGE, len)
            }
        };
        let len = pages * PAGE;

        // Participants.
        let single = matches!(
            kind,
            "touch" | "madvise" | "move_pages" | "mprotect" | "mmap" | "munmap"
        );
        let mut participants = vec![false; nthreads as usize];
        match &p.threads {
            None if single => participants[0] = true,
            None => participants.iter_mut().for_each(|x| *x = true),
            Some(list) => {
                if list.is_empty() {
                    return Err(e.at(key("threads"), "needs at least one thread"));
                }
                for (j, &t) in list.iter().enumerate() {
                    if t >= nthreads {
                        return Err(e.at(
                            format!("workload.phases[{i}].threads[{j}]"),
                            format!("thread {t} does not exist (threads = {nthreads})"),
                        ));
                    }
                    if participants[t as usize] {
                        return Err(e.at(
                            format!("workload.phases[{i}].threads[{j}]"),
                            format!("thread {t} listed twice"),
                        ));
                    }
                    participants[t as usize] = true;
                }
            }
        }
        let lead = participants.iter().position(|&x| x).unwrap_or(0) as u32;

        // Access pacing and writes.
        let pace = match p.rate_per_s {
            None => None,
            Some(r) => {
                if !(r > 0.0 && r.is_finite()) {
                    return Err(e.at(key("rate_per_s"), format!("must be > 0, got {r}")));
                }
                let ns = 1e9 / r;
                if ns < 1.0 {
                    return Err(e.at(
                        key("rate_per_s"),
                        format!("{r} accesses/s needs an interval below 1 ns"),
                    ));
                }
                if ns.round() > u32::MAX as f64 {
                    return Err(e.at(
                        key("rate_per_s"),
                        format!(
                            "{r} accesses/s is too slow (interval above {} ns)",
                            u32::MAX
                        ),
                    ));
                }
                Some(ns.round() as u32)
            }
        };
        let writes = match (p.write, p.write_fraction) {
            (Some(_), Some(_)) => {
                return Err(e.at(key("write_fraction"), "give either write or write_fraction"))
            }
            (Some(true), None) => Writes::Always,
            (Some(false), None) | (None, None) => Writes::Never,
            (None, Some(f)) => {
                if !(0.0..=1.0).contains(&f) {
                    return Err(e.at(key("write_fraction"), format!("must be in [0, 1], got {f}")));
                }
                Writes::Fraction(f)
            }
        };
        let access = |pattern| {
            Body::Access(Access {
                start,
                pages,
                pattern,
                writes,
                pace,
                gap: p.gap_cycles,
            })
        };

        let mut after = None;
        let body = match kind {
            "touch" => {
                if let Some(n) = region.and_then(|r| r.node) {
                    let r = region.unwrap();
                    after = Some(Op::MovePages {
                        addr: r.start,
                        len: r.pages * PAGE,
                        node: n,
                    });
                }
                let pattern = match p.order.as_deref().unwrap_or("sequential") {
                    "sequential" => Pattern::Seq,
                    "reverse" => Pattern::Rev,
                    "random" => {
                        if pages > u32::MAX as u64 {
                            return Err(e.at(key("pages"), "too many pages for a random order"));
                        }
                        let mut perm: Vec<u32> = (0..pages as u32).collect();
                        perm.shuffle(&mut ChaCha8Rng::seed_from_u64(mix(
                            seed,
                            0x7065_726d,
                            i as u64,
                        )));
                        Pattern::Perm(perm.into())
                    }
                    o => {
                        return Err(e.at(
                            key("order"),
                            format!("unknown order {o:?} (expected sequential, reverse or random)"),
                        ))
                    }
                };
                access(pattern)
            }
            "stride" => {
                let bytes = p.stride_bytes.unwrap_or(PAGE);
                if bytes == 0 {
                    return Err(e.at(key("stride_bytes"), "must be > 0"));
                }
                access(Pattern::Stride {
                    bytes,
                    count: len.div_ceil(bytes),
                })
            }
            "random" => {
                let count = match (p.count, p.duration_ms) {
                    (Some(c), None) => c,
                    (None, Some(d)) => {
                        let Some(r) = p.rate_per_s else {
                            return Err(e.at(
                                key("duration_ms"),
                                "duration_ms needs rate_per_s (the access count is duration × rate)",
                            ));
                        };
                        if !(d >= 0.0 && d.is_finite()) {
                            return Err(e.at(key("duration_ms"), format!("must be >= 0, got {d}")));
                        }
                        (d * 1e-3 * r).round() as u64
                    }
                    (Some(_), Some(_)) => {
                        return Err(e.at(key("count"), "give either count or duration_ms, not both"))
                    }
                    (None, None) => {
                        return Err(
                            e.at(key("count"), "a `random` phase needs count or duration_ms")
                        )
                    }
                };
                let hot_last = match p.hot.as_deref() {
                    None | Some("first") => false,
                    Some("last") => true,
                    Some(h) => {
                        return Err(e.at(
                            key("hot"),
                            format!("unknown hot end {h:?} (expected first or last)"),
                        ))
                    }
                };
                match p.distribution.as_deref().unwrap_or("uniform") {
                    "uniform" => {
                        if p.zipf_s.is_some() {
                            return Err(
                                e.at(key("zipf_s"), "only used with distribution = \"zipf\"")
                            );
                        }
                        if p.hot.is_some() {
                            return Err(e.at(key("hot"), "only used with distribution = \"zipf\""));
                        }
                        access(Pattern::Uniform { count })
                    }
                    "zipf" => {
                        let s = p.zipf_s.unwrap_or(0.99);
                        if !(s > 0.0 && s.is_finite()) {
                            return Err(e.at(key("zipf_s"), format!("must be > 0, got {s}")));
                        }
                        let mut cdf: Vec<f64> = Vec::with_capacity(pages as usize);
                        let mut sum = 0.0;
                        for k in 0..pages {
                            sum += ((k + 1) as f64).powf(-s);
                            cdf.push(sum);
                        }
                        cdf.iter_mut().for_each(|c| *c /= sum);
                        if let Some(last) = cdf.last_mut() {
                            *last = 1.0;
                        }
                        access(Pattern::Zipf {
                            count,
                            cdf: cdf.into(),
                            hot_last,
                        })
                    }
                    d => {
                        return Err(e.at(
                            key("distribution"),
                            format!("unknown distribution {d:?} (expected uniform or zipf)"),
                        ))
                    }
                }
            }
            "madvise" => {
                let a = match p.advice.as_deref() {
                    Some("pageout") => advice::MADV_PAGEOUT,
                    Some("cold") => advice::MADV_COLD,
                    Some("dontneed") => advice::MADV_DONTNEED,
                    Some(a) => {
                        return Err(e.at(
                            key("advice"),
                            format!("unknown advice {a:?} (expected pageout, cold or dontneed)"),
                        ))
                    }
                    None => return Err(e.at(key("advice"), "a `madvise` phase needs advice")),
                };
                Body::Op(Op::Madvise {
                    addr: start,
                    len,
                    advice: a,
                })
            }
            "move_pages" => {
                let n = p
                    .node
                    .ok_or_else(|| e.at(key("node"), "a `move_pages` phase needs node"))?;
                if n >= nodes {
                    return Err(e.at(
                        key("node"),
                        format!("missing node {n} (the machine has {nodes} nodes)"),
                    ));
                }
                Body::Op(Op::MovePages {
                    addr: start,
                    len,
                    node: n,
                })
            }
            "mprotect" => {
                let s = p
                    .prot
                    .as_deref()
                    .ok_or_else(|| e.at(key("prot"), "an `mprotect` phase needs prot"))?;
                let bits = parse_prot(s).ok_or_else(|| {
                    e.at(
                        key("prot"),
                        format!("unknown prot {s:?} (expected none, r, rw, rx, rwx)"),
                    )
                })?;
                Body::Op(Op::Mprotect {
                    addr: start,
                    len,
                    prot: bits,
                })
            }
            "mmap" => {
                let r = region.unwrap();
                let backing = match r.backing {
                    Backing::Anon => Backing::Anon,
                    Backing::File { file, .. } => Backing::File {
                        file,
                        pgoff: (start - r.start) / PAGE,
                    },
                };
                Body::Op(Op::Mmap {
                    addr: start,
                    len,
                    prot: r.prot,
                    backing,
                })
            }
            "munmap" => Body::Op(Op::Munmap { addr: start, len }),
            "sleep" => {
                let ms =
                    p.ms.ok_or_else(|| e.at(key("ms"), "a `sleep` phase needs ms"))?;
                if !(ms >= 0.0 && ms.is_finite()) {
                    return Err(e.at(key("ms"), format!("must be >= 0, got {ms}")));
                }
                Body::Op(Op::Sleep((ms * 1e6).round() as u64))
            }
            _ => Body::Nothing, // barrier
        };

        // Name: explicit names must be unique; default names get a " #k" suffix.
        let name = match &p.name {
            Some(n) => {
                if phase_ids.contains_key(n) {
                    return Err(e.at(key("name"), format!("duplicate phase name {n:?}")));
                }
                n.clone()
            }
            None => {
                let base = match &p.region {
                    Some(r) => format!("{kind} {r}"),
                    None => kind.to_string(),
                };
                let mut n = base.clone();
                let mut k = 2;
                while phase_ids.contains_key(&n)
                    || cfg.phases.iter().any(|q| q.name.as_ref() == Some(&n))
                {
                    n = format!("{base} #{k}");
                    k += 1;
                }
                n
            }
        };
        phase_ids.insert(name.clone(), i);
        names.push(name);
        plans.push(PhasePlan {
            id: i as u32,
            participants,
            body,
            after,
            lead,
        });
    }

    // Loops.
    let mut owner: Vec<Option<usize>> = vec![None; plans.len()];
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (g, l) in cfg.groups.iter().enumerate() {
        if l.times == 0 {
            return Err(e.at(format!("workload.loop[{g}].times"), "must be at least 1"));
        }
        if l.phases.is_empty() {
            return Err(e.at(
                format!("workload.loop[{g}].phases"),
                "needs at least one phase",
            ));
        }
        let mut m = Vec::new();
        for (j, n) in l.phases.iter().enumerate() {
            let k = format!("workload.loop[{g}].phases[{j}]");
            let &pi = phase_ids
                .get(n)
                .ok_or_else(|| e.at(&k, format!("unknown phase name {n:?}")))?;
            match owner[pi] {
                Some(o) if o != g => {
                    return Err(e.at(&k, format!("phase {n:?} is already in workload.loop[{o}]")))
                }
                _ => owner[pi] = Some(g),
            }
            m.push(pi);
        }
        members.push(m);
    }
    let mut steps = Vec::new();
    let mut emitted = vec![false; cfg.groups.len()];
    for (i, o) in owner.iter().enumerate() {
        match *o {
            None => steps.push(Step {
                members: vec![i],
                times: 1,
            }),
            Some(g) if !emitted[g] => {
                emitted[g] = true;
                steps.push(Step {
                    members: members[g].clone(),
                    times: cfg.groups[g].times,
                });
            }
            Some(_) => {}
        }
    }

    // Info.
    let mut info = vec![(
        "threads".to_string(),
        format!(
            "{nthreads} ({})",
            match &cfg.placement {
                None => "spread".to_string(),
                Some(PlacementCfg::Named(s)) => s.clone(),
                Some(PlacementCfg::Cpus(c)) => format!("CPUs {c:?}"),
            }
        ),
    )];
    let region_list: Vec<String> = regions
        .iter()
        .map(|r| {
            format!(
                "{} {} KiB {} at {:#x}{}",
                r.name,
                r.pages * 4,
                if matches!(r.backing, Backing::Anon) {
                    "anon"
                } else {
                    "file"
                },
                r.start,
                r.node
                    .map(|n| format!(" bound to node {n}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    info.push(("regions".to_string(), region_list.join("; ")));
    let step_list: Vec<String> = steps
        .iter()
        .map(|s| {
            let n: Vec<&str> = s.members.iter().map(|&m| names[m].as_str()).collect();
            if s.times == 1 && n.len() == 1 {
                n[0].to_string()
            } else {
                format!("{} × [{}]", s.times, n.join(", "))
            }
        })
        .collect();
    let mut program = step_list.join(", ");
    if cfg.loops > 1 {
        program = format!("{} × ({program})", cfg.loops);
    }
    info.push(("program".to_string(), program));

    let prologue: Vec<Op> = regions
        .iter()
        .map(|r| Op::Mmap {
            addr: r.start,
            len: r.pages * PAGE,
            prot: r.prot,
            backing: r.backing,
        })
        .collect();
    let mut region_specs: Vec<RegionSpec> = regions
        .iter()
        .map(|r| RegionSpec {
            name: r.name.clone(),
            process: 0,
            start: r.start,
            len: r.pages * PAGE,
        })
        .collect();
    for (i, w) in cfg.watch.iter().enumerate() {
        let key = |k: &str| format!("{origin}: key `workload.watch[{i}].{k}`: ");
        let Some(r) = regions.iter().find(|r| r.name == w.region) else {
            return Err(ConfigError(format!(
                "{}unknown region '{}'",
                key("region"),
                w.region
            )));
        };
        let pages = w.pages.unwrap_or(r.pages.saturating_sub(w.offset_pages));
        if pages == 0 || w.offset_pages + pages > r.pages {
            return Err(ConfigError(format!(
                "{}pages {}..{} are outside region '{}' ({} pages)",
                key("pages"),
                w.offset_pages,
                w.offset_pages + pages,
                r.name,
                r.pages
            )));
        }
        region_specs.push(RegionSpec {
            name: w.name.clone(),
            process: 0,
            start: r.start + w.offset_pages * PAGE,
            len: pages * PAGE,
        });
    }
    let prog = Arc::new(Program {
        prologue,
        phases: plans,
        steps,
        loops: cfg.loops,
    });
    let threads = placements
        .into_iter()
        .enumerate()
        .map(|(t, placement)| ThreadSpec {
            process: 0,
            placement,
            stream: Box::new(Stream {
                prog: Arc::clone(&prog),
                tid: t as u32,
                rng: ChaCha8Rng::seed_from_u64(mix(seed, 0x7468_7264, t as u64)),
                started: false,
                done: false,
                outer: 0,
                step: 0,
                rep: 0,
                member: 0,
                in_phase: false,
                next: 0,
            }) as Box<dyn ThreadStream>,
        })
        .collect();
    Ok(Workload {
        name: cfg.name.unwrap_or_else(|| "scripted".to_string()),
        work_unit: "accesses".to_string(),
        processes: 1,
        files,
        threads,
        info,
        phases: names,
        regions: region_specs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: &str = "[workload]\ntype = \"scripted\"\n";

    fn try_build(src: &str, seed: u64) -> Result<Workload, ConfigError> {
        let doc: toml::Table = toml::from_str(&format!("{HDR}{src}")).expect("test TOML parses");
        let table = doc["workload"].as_table().unwrap().clone();
        build(&table, "t.toml", seed, 2, 4, 2.2)
    }

    fn wl(src: &str) -> Workload {
        try_build(src, 7).unwrap_or_else(|e| panic!("{e}"))
    }

    fn drain(s: &mut dyn ThreadStream) -> Vec<Op> {
        let mut out = Vec::new();
        loop {
            let before = out.len();
            s.refill(&mut out);
            if out.len() == before {
                return out;
            }
            assert!(out.len() - before <= CHUNK + 8, "refill must stay chunked");
            assert!(out.len() < 50_000_000, "runaway stream");
        }
    }

    fn ops(w: &mut Workload, t: usize) -> Vec<Op> {
        drain(w.threads[t].stream.as_mut())
    }

    fn accesses(ops: &[Op]) -> Vec<Op> {
        ops.iter()
            .copied()
            .filter(|o| matches!(o, Op::Load(_) | Op::Store(_)))
            .collect()
    }

    fn addr(o: &Op) -> u64 {
        match o {
            Op::Load(a) | Op::Store(a) => *a,
            _ => panic!("not an access: {o:?}"),
        }
    }

    const BUF8: &str = "[[workload.regions]]\nname = \"buf\"\npages = 8\n";

    #[test]
    fn touch_sequential_exact_sequence() {
        let mut w = wl(&format!(
            "{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n"
        ));
        assert_eq!(w.phases, vec!["touch buf".to_string()]);
        assert_eq!(w.regions.len(), 1);
        assert_eq!(w.regions[0].start, BASE);
        assert_eq!(w.regions[0].len, 8 * PAGE);
        let o = ops(&mut w, 0);
        let mut want = vec![
            Op::Mmap {
                addr: BASE,
                len: 8 * PAGE,
                prot: prot::READ | prot::WRITE,
                backing: Backing::Anon,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(0)),
        ];
        want.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
        want.extend([Op::Mark(Mark::Work(8)), Op::Barrier, Op::Exit]);
        assert_eq!(o, want);
    }

    #[test]
    fn touch_reverse_and_random_permutation() {
        let mut w = wl(&format!(
            "{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\norder = \"reverse\"\n"
        ));
        let a = accesses(&ops(&mut w, 0));
        let want: Vec<Op> = (0..8).rev().map(|i| Op::Load(BASE + i * PAGE)).collect();
        assert_eq!(a, want);

        let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 64\n\
             [[workload.phases]]\nkind = \"touch\"\nregion = \"b\"\norder = \"random\"\n");
        let a: Vec<u64> = accesses(&ops(&mut w, 0)).iter().map(addr).collect();
        assert_eq!(a.len(), 64);
        let seq: Vec<u64> = (0..64).map(|i| BASE + i * PAGE).collect();
        assert_ne!(a, seq, "a random order should not be sequential");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, seq, "every page exactly once");
    }

    #[test]
    fn stride_and_subrange() {
        let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 2\n\
             [[workload.phases]]\nkind = \"stride\"\nregion = \"b\"\nstride_bytes = 1024\n\
             [[workload.phases]]\nkind = \"stride\"\nregion = \"b\"\nstride_bytes = 3000\noffset_pages = 1\npages = 1\nwrite = true\n");
        assert_eq!(w.phases, vec!["stride b", "stride b #2"]);
        let o = ops(&mut w, 0);
        let a = accesses(&o);
        let mut want: Vec<Op> = (0..8).map(|i| Op::Load(BASE + i * 1024)).collect();
        want.extend([Op::Store(BASE + PAGE), Op::Store(BASE + PAGE + 3000)]);
        assert_eq!(a, want);
        assert!(o.contains(&Op::Mark(Mark::Work(8))));
        assert!(o.contains(&Op::Mark(Mark::Work(2))));
    }

    #[test]
    fn single_op_phases() {
        let mut w = wl(&format!(
            "{BUF8}[[workload.regions]]\nname = \"f\"\nkind = \"file\"\nsize_kib = 16\nprot = \"r\"\n\
             [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
             [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"cold\"\noffset_pages = 2\npages = 3\n\
             [[workload.phases]]\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"dontneed\"\n\
             [[workload.phases]]\nkind = \"move_pages\"\nregion = \"buf\"\nnode = 1\n\
             [[workload.phases]]\nkind = \"mprotect\"\nregion = \"buf\"\nprot = \"r\"\n\
             [[workload.phases]]\nkind = \"sleep\"\nms = 10\n\
             [[workload.phases]]\nkind = \"barrier\"\n\
             [[workload.phases]]\nkind = \"munmap\"\nregion = \"f\"\n\
             [[workload.phases]]\nkind = \"mmap\"\nregion = \"f\"\noffset_pages = 1\n"
        ));
        assert_eq!(w.files.len(), 1);
        assert_eq!(w.files[0].pages, 4);
        let f = w.regions[1].start;
        assert!(f >= BASE + 8 * PAGE + ALIGN);
        assert_eq!(f % ALIGN, 0);
        let o = ops(&mut w, 0);
        let want = vec![
            Op::Mmap {
                addr: BASE,
                len: 8 * PAGE,
                prot: 3,
                backing: Backing::Anon,
            },
            Op::Mmap {
                addr: f,
                len: 4 * PAGE,
                prot: prot::READ,
                backing: Backing::File { file: 0, pgoff: 0 },
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(0)),
            Op::Madvise {
                addr: BASE,
                len: 8 * PAGE,
                advice: advice::MADV_PAGEOUT,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(1)),
            Op::Madvise {
                addr: BASE + 2 * PAGE,
                len: 3 * PAGE,
                advice: advice::MADV_COLD,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(2)),
            Op::Madvise {
                addr: BASE,
                len: 8 * PAGE,
                advice: advice::MADV_DONTNEED,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(3)),
            Op::MovePages {
                addr: BASE,
                len: 8 * PAGE,
                node: 1,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(4)),
            Op::Mprotect {
                addr: BASE,
                len: 8 * PAGE,
                prot: prot::READ,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(5)),
            Op::Sleep(10_000_000),
            Op::Barrier,
            Op::Mark(Mark::Phase(6)),
            Op::Barrier,
            Op::Mark(Mark::Phase(7)),
            Op::Munmap {
                addr: f,
                len: 4 * PAGE,
            },
            Op::Barrier,
            Op::Mark(Mark::Phase(8)),
            Op::Mmap {
                addr: f + PAGE,
                len: 3 * PAGE,
                prot: prot::READ,
                backing: Backing::File { file: 0, pgoff: 1 },
            },
            Op::Barrier,
            Op::Exit,
        ];
        assert_eq!(o, want);
    }

    #[test]
    fn participants_and_barriers() {
        let mut w = wl(&format!(
            "threads = 3\nplacement = \"pinned\"\n{BUF8}\
             [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 5\n\
             [[workload.phases]]\nkind = \"sleep\"\nms = 1\nthreads = [1, 2]\n"
        ));
        assert_eq!(w.threads[2].placement, Placement::Pinned(2));
        let per: Vec<Vec<Op>> = (0..3).map(|t| ops(&mut w, t)).collect();
        for (t, o) in per.iter().enumerate() {
            let barriers = o.iter().filter(|x| **x == Op::Barrier).count();
            assert_eq!(barriers, 4, "thread {t}: prologue + one per phase");
            let marks: Vec<u32> = o
                .iter()
                .filter_map(|x| match x {
                    Op::Mark(Mark::Phase(p)) => Some(*p),
                    _ => None,
                })
                .collect();
            let want: Vec<u32> = match t {
                0 => vec![0, 1],
                _ => vec![1, 2],
            };
            assert_eq!(marks, want, "thread {t}");
            assert_eq!(accesses(o).len(), if t == 0 { 13 } else { 5 });
            assert_eq!(
                o.iter().filter(|x| matches!(x, Op::Mmap { .. })).count(),
                (t == 0) as usize
            );
            assert_eq!(o.last(), Some(&Op::Exit));
        }
    }

    #[test]
    fn loops_repeat_phase_groups() {
        let mut w = wl("[[workload.regions]]\nname = \"buf\"\npages = 4\n\
             [[workload.phases]]\nname = \"touch\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
             [[workload.phases]]\nname = \"pageout\"\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
             [[workload.phases]]\nname = \"end\"\nkind = \"barrier\"\n\
             [[workload.loop]]\ntimes = 3\nphases = [\"touch\", \"pageout\"]\n");
        assert_eq!(w.phases, vec!["touch", "pageout", "end"]);
        let o = ops(&mut w, 0);
        let marks: Vec<u32> = o
            .iter()
            .filter_map(|x| match x {
                Op::Mark(Mark::Phase(p)) => Some(*p),
                _ => None,
            })
            .collect();
        assert_eq!(marks, vec![0, 1, 0, 1, 0, 1, 2]);
        let stores = o.iter().filter(|x| matches!(x, Op::Store(_))).count();
        let madv = o
            .iter()
            .filter(|x| {
                matches!(
                    x,
                    Op::Madvise {
                        advice: advice::MADV_PAGEOUT,
                        ..
                    }
                )
            })
            .count();
        assert_eq!((stores, madv), (12, 3));
        // Whole-program repetition.
        let mut w = wl(&format!(
            "loops = 2\n{BUF8}[[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\n"
        ));
        assert_eq!(accesses(&ops(&mut w, 0)).len(), 16);
    }

    #[test]
    fn long_loops_are_lazy() {
        let mut w = wl("[[workload.regions]]\nname = \"buf\"\nsize_mib = 1\n\
             [[workload.phases]]\nname = \"t\"\nkind = \"touch\"\nregion = \"buf\"\nwrite = true\n\
             [[workload.phases]]\nname = \"p\"\nkind = \"madvise\"\nregion = \"buf\"\nadvice = \"pageout\"\n\
             [[workload.loop]]\ntimes = 10000\nphases = [\"t\", \"p\"]\n");
        let s = w.threads[0].stream.as_mut();
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut calls = 0;
        loop {
            out.clear();
            s.refill(&mut out);
            if out.is_empty() {
                break;
            }
            assert!(out.len() <= CHUNK + 8);
            total += out.len();
            calls += 1;
        }
        // 10 000 × (mark + 256 stores + work + barrier + mark + madvise + barrier) + prologue + exit.
        assert_eq!(total, 10_000 * 262 + 3);
        assert!(calls > 2000);
    }

    #[test]
    fn region_node_binding_moves_after_touch() {
        let mut w = wl(
            "[[workload.regions]]\nname = \"buf\"\npages = 4\nnode = 1\n\
             [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\noffset_pages = 1\n",
        );
        let o = ops(&mut w, 0);
        let n = o.len();
        assert_eq!(
            &o[n - 4..],
            &[
                Op::Mark(Mark::Work(3)),
                Op::MovePages {
                    addr: BASE,
                    len: 4 * PAGE,
                    node: 1
                },
                Op::Barrier,
                Op::Exit
            ]
        );
    }

    fn page_counts(w: &mut Workload, pages: usize) -> Vec<u64> {
        let mut c = vec![0u64; pages];
        for a in accesses(&ops(w, 0)) {
            let off = addr(&a) - BASE;
            assert_eq!(off % 8, 0);
            c[(off / PAGE) as usize] += 1;
        }
        c
    }

    #[test]
    fn uniform_distribution() {
        let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 160000\n");
        let c = page_counts(&mut w, 16);
        assert_eq!(c.iter().sum::<u64>(), 160_000);
        let mut chi2 = 0.0;
        for &x in &c {
            assert!((9500..=10500).contains(&x), "{c:?}");
            chi2 += (x as f64 - 10_000.0).powi(2) / 10_000.0;
        }
        // 15 degrees of freedom: p = 0.001 at 37.7.
        assert!(chi2 < 37.7, "chi2 {chi2}");
    }

    #[test]
    fn zipf_distribution() {
        let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 160000\n\
             distribution = \"zipf\"\nzipf_s = 1.0\n");
        let c = page_counts(&mut w, 16);
        let h: f64 = (1..=16).map(|k| 1.0 / k as f64).sum();
        let f0 = c[0] as f64 / 160_000.0;
        assert!(
            (f0 * h - 1.0).abs() < 0.05,
            "page 0 freq {f0}, expected {}",
            1.0 / h
        );
        for (k, &n) in c.iter().enumerate() {
            let want = 160_000.0 / ((k + 1) as f64 * h);
            assert!(
                (n as f64 / want - 1.0).abs() < 0.1,
                "page {k}: {n} vs {want}",
            );
        }
        // Monotone on average: later blocks of pages are colder.
        assert!(c[..4].iter().sum::<u64>() > c[4..8].iter().sum::<u64>());
        assert!(c[4..8].iter().sum::<u64>() > c[8..16].iter().sum::<u64>() / 2);
        // hot = "last" mirrors it.
        let mut w = wl("[[workload.regions]]\nname = \"b\"\npages = 16\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"b\"\ncount = 20000\n\
             distribution = \"zipf\"\nzipf_s = 1.0\nhot = \"last\"\n");
        let c = page_counts(&mut w, 16);
        assert!(c[15] > c[0] * 8 && c[15] > c[14], "{c:?}");
    }

    #[test]
    fn write_fraction_and_write_flag() {
        let mut w = wl(&format!(
            "{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 20000\nwrite_fraction = 0.2\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 100\nwrite = true\n"
        ));
        let a = accesses(&ops(&mut w, 0));
        let stores = a[..20000]
            .iter()
            .filter(|x| matches!(x, Op::Store(_)))
            .count();
        assert!((3600..=4400).contains(&stores), "{stores}");
        assert!(a[20000..].iter().all(|x| matches!(x, Op::Store(_))));
    }

    #[test]
    fn rate_and_gap_control() {
        let mut w = wl(&format!(
            "{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 5\nrate_per_s = 1000000\n\
             [[workload.phases]]\nkind = \"stride\"\nregion = \"buf\"\nstride_bytes = 8192\ngap_cycles = 100\n\
             [[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\nduration_ms = 2\nrate_per_s = 3000\n"
        ));
        let o = ops(&mut w, 0);
        let p0 = o
            .iter()
            .position(|x| *x == Op::Mark(Mark::Phase(0)))
            .unwrap();
        for k in 0..5 {
            assert_eq!(o[p0 + 1 + 2 * k], Op::Pace(1000));
            assert!(matches!(o[p0 + 2 + 2 * k], Op::Load(_)));
        }
        let p1 = o
            .iter()
            .position(|x| *x == Op::Mark(Mark::Phase(1)))
            .unwrap();
        let want = [
            Op::Load(BASE),
            Op::Compute(100),
            Op::Load(BASE + 2 * PAGE),
            Op::Compute(100),
            Op::Load(BASE + 4 * PAGE),
            Op::Compute(100),
            Op::Load(BASE + 6 * PAGE),
            Op::Mark(Mark::Work(4)),
        ];
        assert_eq!(&o[p1 + 1..p1 + 9], &want);
        let p2 = o
            .iter()
            .position(|x| *x == Op::Mark(Mark::Phase(2)))
            .unwrap();
        let paces = o[p2..].iter().filter(|x| **x == Op::Pace(333_333)).count();
        assert_eq!(paces, 6);
        assert_eq!(accesses(&o[p2..]).len(), 6);
    }

    #[test]
    fn deterministic_per_seed() {
        let src = format!(
            "threads = 2\n{BUF8}[[workload.phases]]\nkind = \"random\"\nregion = \"buf\"\ncount = 3000\n\
             distribution = \"zipf\"\nwrite_fraction = 0.5\n\
             [[workload.phases]]\nkind = \"touch\"\nregion = \"buf\"\norder = \"random\"\n"
        );
        let run = |seed| {
            let mut w = try_build(&src, seed).unwrap();
            (ops(&mut w, 0), ops(&mut w, 1))
        };
        let a = run(1);
        assert_eq!(a, run(1));
        assert_ne!(a.0, a.1, "threads draw different streams");
        assert_ne!(a, run(2));
    }

    #[test]
    fn errors_name_the_key() {
        let r = "[[workload.regions]]\nname = \"buf\"\npages = 8\n";
        let ph = |body: &str| format!("{r}[[workload.phases]]\n{body}\n");
        let cases: Vec<(String, &str)> = vec![
            (ph("kind = \"touch\"\nregion = \"buf\"\ncnt = 3"), "`workload.phases[0].cnt`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = \"x\""), "`workload.phases[0].count`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\npages = 9"), "`workload.phases[0].pages`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\noffset_pages = 4\npages = 5"), "`workload.phases[0].pages`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\noffset_pages = 8"), "`workload.phases[0].offset_pages`"),
            (ph("kind = \"touch\"\nregion = \"nope\""), "`workload.phases[0].region`"),
            (ph("kind = \"touch\""), "`workload.phases[0].region`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = 0"), "`workload.phases[0].rate_per_s`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = -5"), "`workload.phases[0].rate_per_s`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nrate_per_s = 2e9"), "`workload.phases[0].rate_per_s`"),
            (format!("{r}node = 2\n"), "`workload.regions[0].node`"),
            (ph("kind = \"move_pages\"\nregion = \"buf\"\nnode = 5"), "`workload.phases[0].node`"),
            (ph("kind = \"move_pages\"\nregion = \"buf\""), "`workload.phases[0].node`"),
            (ph("name = \"a\"\nkind = \"barrier\"") + "[[workload.loop]]\ntimes = 2\nphases = [\"b\"]\n", "`workload.loop[0].phases[0]`"),
            (ph("name = \"a\"\nkind = \"barrier\"") + "[[workload.loop]]\ntimes = 0\nphases = [\"a\"]\n", "`workload.loop[0].times`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\nthreads = [1]"), "`workload.phases[0].threads[0]`"),
            (format!("threads = 5\nplacement = \"pinned\"\n{r}"), "`workload.placement`"),
            (format!("threads = 2\nplacement = [0, 4]\n{r}"), "`workload.placement[1]`"),
            (format!("placement = \"everywhere\"\n{r}"), "`workload.placement`"),
            ("[[workload.regions]]\nname = \"b\"\npages = 0\n".to_string(), "`workload.regions[0].pages`"),
            ("[[workload.regions]]\nname = \"b\"\nsize_mib = 0\n".to_string(), "`workload.regions[0].size_mib`"),
            ("[[workload.regions]]\nname = \"b\"\n".to_string(), "`workload.regions[0]`"),
            ("[[workload.regions]]\nname = \"b\"\npages = 1\nsize_kib = 4\n".to_string(), "`workload.regions[0]`"),
            ("[[workload.regions]]\nname = \"b\"\npages = 1\nkind = \"shm\"\n".to_string(), "`workload.regions[0].kind`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\ndistribution = \"zipf\"\nzipf_s = 0"), "`workload.phases[0].zipf_s`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\nduration_ms = 5\nrate_per_s = 10"), "`workload.phases[0].count`"),
            (ph("kind = \"random\"\nregion = \"buf\""), "`workload.phases[0].count`"),
            (ph("kind = \"random\"\nregion = \"buf\"\nduration_ms = 5"), "`workload.phases[0].duration_ms`"),
            (ph("kind = \"stride\"\nregion = \"buf\"\nstride_bytes = 0"), "`workload.phases[0].stride_bytes`"),
            (ph("kind = \"fly\"\nregion = \"buf\""), "`workload.phases[0].kind`"),
            (ph("kind = \"madvise\"\nregion = \"buf\"\nadvice = \"free\""), "`workload.phases[0].advice`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\norder = \"sideways\""), "`workload.phases[0].order`"),
            (ph("kind = \"random\"\nregion = \"buf\"\ncount = 1\ndistribution = \"normal\""), "`workload.phases[0].distribution`"),
            (ph("kind = \"touch\"\nregion = \"buf\"\nms = 3"), "`workload.phases[0].ms`"),
            (ph("kind = \"mprotect\"\nregion = \"buf\"\nprot = \"q\""), "`workload.phases[0].prot`"),
            (ph("name = \"x\"\nkind = \"barrier\"") + "[[workload.phases]]\nname = \"x\"\nkind = \"barrier\"\n", "`workload.phases[1].name`"),
            ("threads = 0\n".to_string(), "`workload.threads`"),
            ("processes = 2\n".to_string(), "`workload.processes`"),
        ];
        for (src, key) in cases {
            match try_build(&src, 1) {
                Ok(_) => panic!("expected an error naming {key} for:\n{src}"),
                Err(e) => {
                    assert!(e.0.starts_with("t.toml: key `"), "{e}");
                    assert!(
                        e.0.contains(key),
                        "error {e:?} should name {key} for:\n{src}"
                    );
                }
            }
        }
    }

    #[test]
    fn watched_sub_ranges_become_timeline_regions_and_bad_ones_name_the_key() {
        let text = r#"
type = "scripted"
[[regions]]
name = "buf"
pages = 64
[[watch]]
name = "buf hot tail"
region = "buf"
offset_pages = 48
"#;
        let t: toml::Table = toml::from_str(text).unwrap();
        let w = build(&t, "t.toml", 1, 2, 1, 2.2).unwrap();
        assert_eq!(w.regions.len(), 2);
        assert_eq!(w.regions[1].name, "buf hot tail");
        assert_eq!(w.regions[1].start, w.regions[0].start + 48 * PAGE);
        assert_eq!(w.regions[1].len, 16 * PAGE);
        let bad = text.replace("offset_pages = 48", "offset_pages = 48\npages = 32");
        let t: toml::Table = toml::from_str(&bad).unwrap();
        let e = build(&t, "t.toml", 1, 2, 1, 2.2).err().unwrap();
        assert!(e.0.contains("key `workload.watch[0].pages`"), "{e}");
        let bad = text.replace("region = \"buf\"", "region = \"nope\"");
        let t: toml::Table = toml::from_str(&bad).unwrap();
        let e = build(&t, "t.toml", 1, 2, 1, 2.2).err().unwrap();
        assert!(e.0.contains("key `workload.watch[0].region`"), "{e}");
    }

    #[test]
    fn scenario_files_build() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for (f, nodes) in [
            ("swap_bench.toml", 2),
            ("swap_young.toml", 2),
            ("hot_set.toml", 2),
        ] {
            let path = format!("{dir}/../scenarios/{f}");
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let doc: toml::Table = toml::from_str(&text).unwrap();
            let seed = doc["scenario"]["seed"].as_integer().unwrap() as u64;
            let cpus = doc["machine"]["cpus"].as_integer().unwrap() as u32;
            let w = build(
                doc["workload"].as_table().unwrap(),
                f,
                seed,
                nodes,
                cpus,
                2.2,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            assert!(!w.phases.is_empty(), "{f}");
        }
    }
}
