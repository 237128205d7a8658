//! Each `[[workload.phases]]` entry checked against the regions and threads and resolved to what
//! a participating thread does: one op, an access pattern, or nothing (a barrier).

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tierlab::config::ConfigError;
use tierlab::workload::{advice, Backing, Op};

use super::config::parse_prot;
use super::phase_keys::{PerThreadCount, PhaseCfg, RandomCfg, RangeKeys};
use super::plan::{Access, Body, Pattern, PhasePlan, Region, Writes, PACE_BATCH_MIN_NS};
use super::{mix, PAGE};
use crate::limits::{MAX_DURATION_MS, PID_MAX_LIMIT};

/// The phases, in definition order.
pub(super) struct Phases {
    /// Report names (explicit or derived from kind and region).
    pub names: Vec<String>,
    /// Phase index by name, for the loop groups.
    pub ids: HashMap<String, usize>,
    pub plans: Vec<PhasePlan>,
    /// Phases some `fork` phase's `child` list names: the parent does not run them on their own.
    pub in_child: Vec<bool>,
}

/// Errors about the keys of phase `i`.
struct At<'a> {
    origin: &'a str,
    i: usize,
}

impl At<'_> {
    fn err(&self, key: &str, msg: impl Display) -> ConfigError {
        ConfigError::key(
            self.origin,
            format!("workload.phases[{}].{key}", self.i),
            msg,
        )
    }
}

/// Resolve the phases; `nodes` is the machine's node count, `seed` orders random touches.
pub(super) fn plan(
    phases: &[PhaseCfg],
    regions: &[Region],
    nthreads: u32,
    nodes: u32,
    seed: u64,
    origin: &str,
) -> Result<Phases, ConfigError> {
    let mut names: Vec<String> = Vec::new();
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut plans: Vec<PhasePlan> = Vec::new();
    for (i, p) in phases.iter().enumerate() {
        let at = At { origin, i };
        let kind = p.kind();
        let keys = p.shared();
        let range = match &keys.range {
            Some(r) => Some(range(r, kind, regions, &at)?),
            None => None,
        };
        let region = range.map(|(r, _, _)| r);
        let (start, pages) = range.map_or((0, 0), |(_, start, pages)| (start, pages));
        let len = pages * PAGE;
        let participants = participants(keys.threads, p.one_thread_by_default(), nthreads, &at)?;
        let lead = participants.iter().position(|&x| x).unwrap_or(0) as u32;
        let (pace, writes, gap, pace_delay) = match keys.access {
            None => (None, Writes::Never, Vec::new(), Vec::new()),
            Some(a) => {
                let pace = pace(a.rate_per_s, &at)?;
                if pace.is_none() && a.pace_delay_ns.is_some() {
                    return Err(at.err("pace_delay_ns", "needs rate_per_s (a paced phase)"));
                }
                (
                    pace,
                    writes(a.write, a.write_fraction, &at)?,
                    per_thread("gap_cycles", a.gap_cycles, nthreads, &at)?,
                    per_thread("pace_delay_ns", a.pace_delay_ns, nthreads, &at)?,
                )
            }
        };
        let access = |pattern| {
            Body::Access(Access {
                start,
                pages,
                pattern,
                writes,
                pace,
                pace_batch: pace.map_or(1, |p| PACE_BATCH_MIN_NS.div_ceil(p as u64)),
                gap: gap.clone(),
                pace_delay: pace_delay.clone(),
            })
        };

        let mut after = None;
        let body = match p {
            PhaseCfg::Touch(c) => {
                // Region binding, approximated: move the whole region to its node once touched.
                after = region.and_then(|r| {
                    Some(Op::MovePages {
                        addr: r.start,
                        len: r.pages * PAGE,
                        node: r.node?,
                    })
                });
                access(touch_order(
                    c.order.as_deref(),
                    pages,
                    mix(seed, 0x7065_726d, i as u64),
                    &at,
                )?)
            }
            PhaseCfg::Stride(c) => {
                let bytes = c.stride_bytes.unwrap_or(PAGE);
                if bytes == 0 {
                    return Err(at.err("stride_bytes", "must be > 0"));
                }
                access(Pattern::Stride {
                    bytes,
                    count: len.div_ceil(bytes),
                })
            }
            PhaseCfg::Random(c) => access(random_pattern(c, pages, &at)?),
            PhaseCfg::Madvise(c) => {
                let a = match c.advice.as_deref() {
                    Some("pageout") => advice::MADV_PAGEOUT,
                    Some("cold") => advice::MADV_COLD,
                    Some("dontneed") => advice::MADV_DONTNEED,
                    Some("hugepage") => advice::MADV_HUGEPAGE,
                    Some("nohugepage") => advice::MADV_NOHUGEPAGE,
                    Some(a) => {
                        return Err(at.err(
                            "advice",
                            format!("unknown advice {a:?} (expected pageout, cold, dontneed, hugepage or nohugepage)"),
                        ))
                    }
                    None => return Err(at.err("advice", "a `madvise` phase needs advice")),
                };
                Body::Op(Op::Madvise {
                    addr: start,
                    len,
                    advice: a,
                })
            }
            PhaseCfg::MovePages(c) => {
                let n = c
                    .node
                    .ok_or_else(|| at.err("node", "a `move_pages` phase needs node"))?;
                if n >= nodes {
                    return Err(at.err(
                        "node",
                        format!("missing node {n} (the machine has {nodes} nodes)"),
                    ));
                }
                Body::Op(Op::MovePages {
                    addr: start,
                    len,
                    node: n,
                })
            }
            PhaseCfg::Mprotect(c) => {
                let s = c
                    .prot
                    .as_deref()
                    .ok_or_else(|| at.err("prot", "an `mprotect` phase needs prot"))?;
                let bits = parse_prot(s).ok_or_else(|| {
                    at.err(
                        "prot",
                        format!("unknown prot {s:?} (expected none, r, rw, rx, rwx)"),
                    )
                })?;
                Body::Op(Op::Mprotect {
                    addr: start,
                    len,
                    prot: bits,
                })
            }
            PhaseCfg::Mmap(_) => {
                let r = region.expect("an mmap phase has a region");
                // A file region mapped from an offset maps the file from that page on.
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
            PhaseCfg::Munmap(_) => Body::Op(Op::Munmap { addr: start, len }),
            PhaseCfg::Sleep(c) => {
                let ms =
                    c.ms.ok_or_else(|| at.err("ms", "a `sleep` phase needs ms"))?;
                if !(0.0..=MAX_DURATION_MS).contains(&ms) {
                    return Err(at.err(
                        "ms",
                        format!("{ms} is out of range ([0, {MAX_DURATION_MS}] ms)"),
                    ));
                }
                Body::Op(Op::Sleep((ms * 1e6).round() as u64))
            }
            PhaseCfg::Barrier(_) => Body::Nothing,
            PhaseCfg::Fork(c) => {
                let count = c.count.unwrap_or(1);
                // The kernel cannot hold more tasks than PID_MAX_LIMIT (4M on 64-bit,
                // include/linux/threads.h), so neither can one fork phase.
                if count == 0 {
                    return Err(at.err("count", "must be at least 1"));
                }
                if count > PID_MAX_LIMIT {
                    return Err(at.err(
                        "count",
                        format!("{count} is out of range (1..={PID_MAX_LIMIT}, PID_MAX_LIMIT)"),
                    ));
                }
                // `child` may name later phases: `children` fills it once every name is known.
                Body::Fork {
                    count,
                    child: Vec::new(),
                }
            }
            PhaseCfg::Wait(_) => Body::Wait,
        };

        // Name: explicit names must be unique; default names get a " #k" suffix.
        let name = match keys.name {
            Some(n) => {
                if ids.contains_key(n) {
                    return Err(at.err("name", format!("duplicate phase name {n:?}")));
                }
                n.clone()
            }
            None => {
                let base = match keys.range.as_ref().and_then(|r| r.region) {
                    Some(r) => format!("{kind} {r}"),
                    None => kind.to_string(),
                };
                let mut n = base.clone();
                let mut k = 2;
                while ids.contains_key(&n) || phases.iter().any(|q| q.shared().name == Some(&n)) {
                    n = format!("{base} #{k}");
                    k += 1;
                }
                n
            }
        };
        ids.insert(name.clone(), i);
        names.push(name);
        plans.push(PhasePlan {
            id: i as u32,
            participants,
            body,
            after,
            lead,
        });
    }
    let in_child = children(phases, &mut plans, &ids, origin)?;
    Ok(Phases {
        names,
        ids,
        plans,
        in_child,
    })
}

/// Resolve each `fork` phase's `child` list to phase indices; returns which phases a child
/// runs.
fn children(
    cfgs: &[PhaseCfg],
    plans: &mut [PhasePlan],
    ids: &HashMap<String, usize>,
    origin: &str,
) -> Result<Vec<bool>, ConfigError> {
    let mut in_child = vec![false; plans.len()];
    for (i, p) in cfgs.iter().enumerate() {
        let PhaseCfg::Fork(c) = p else { continue };
        let at = At { origin, i };
        let names = c.child.as_deref().unwrap_or_default();
        if names.is_empty() {
            return Err(at.err(
                "child",
                "a `fork` phase needs child, the list of phases each child runs",
            ));
        }
        let mut list = Vec::new();
        for (j, n) in names.iter().enumerate() {
            let key = format!("child[{j}]");
            let &ci = ids
                .get(n)
                .ok_or_else(|| at.err(&key, format!("unknown phase name {n:?}")))?;
            match cfgs[ci].kind() {
                "fork" => {
                    let msg = format!("phase {n:?} is a `fork` phase; a child forks no children");
                    return Err(at.err(&key, msg));
                }
                "wait" => {
                    let msg = format!("phase {n:?} is a `wait` phase; a child has no children");
                    return Err(at.err(&key, msg));
                }
                _ => {}
            }
            // A child takes its forking thread's part in a phase: it must have one.
            let (forking, runs) = (&plans[i].participants, &plans[ci].participants);
            if !forking.iter().zip(runs).any(|(&f, &r)| f && r) {
                let msg = format!(
                    "phase {n:?} runs on threads {:?}, and none of them forks here (threads \
                     {:?}); a child runs a phase only if its forking thread is in the phase's \
                     `threads`",
                    thread_list(runs),
                    thread_list(forking)
                );
                return Err(at.err(&key, msg));
            }
            in_child[ci] = true;
            list.push(ci);
        }
        if let Body::Fork { child, .. } = &mut plans[i].body {
            *child = list;
        }
    }
    Ok(in_child)
}

/// The thread numbers a participant list sets.
fn thread_list(participants: &[bool]) -> Vec<usize> {
    (participants.iter().enumerate())
        .filter_map(|(t, &p)| p.then_some(t))
        .collect()
}

/// The region a phase names and its sub-range: (region, start address, pages).
fn range<'r>(
    keys: &RangeKeys,
    kind: &str,
    regions: &'r [Region],
    at: &At,
) -> Result<(&'r Region, u64, u64), ConfigError> {
    let name = keys
        .region
        .ok_or_else(|| at.err("region", format!("a `{kind}` phase needs a region")))?;
    let r = regions
        .iter()
        .find(|r| r.name == name)
        .ok_or_else(|| at.err("region", format!("unknown region {name:?}")))?;
    let off = keys.offset_pages.unwrap_or(0);
    if off >= r.pages {
        return Err(at.err(
            "offset_pages",
            format!(
                "offset {off} is outside region {:?} ({} pages)",
                r.name, r.pages
            ),
        ));
    }
    let len = keys.pages.unwrap_or(r.pages - off);
    if len == 0 || len > r.pages - off {
        return Err(at.err(
            "pages",
            format!(
                "{len} pages from offset {off} is outside region {:?} ({} pages)",
                r.name, r.pages
            ),
        ));
    }
    Ok((r, r.start + off * PAGE, len))
}

/// Which threads take part: the `threads` list, else thread 0 or all of them.
fn participants(
    list: Option<&[u32]>,
    one_by_default: bool,
    nthreads: u32,
    at: &At,
) -> Result<Vec<bool>, ConfigError> {
    let mut participants = vec![false; nthreads as usize];
    match list {
        None if one_by_default => participants[0] = true,
        None => participants.iter_mut().for_each(|x| *x = true),
        Some(list) => {
            if list.is_empty() {
                return Err(at.err("threads", "needs at least one thread"));
            }
            for (j, &t) in list.iter().enumerate() {
                if t >= nthreads {
                    return Err(at.err(
                        &format!("threads[{j}]"),
                        format!("thread {t} does not exist (threads = {nthreads})"),
                    ));
                }
                if participants[t as usize] {
                    return Err(
                        at.err(&format!("threads[{j}]"), format!("thread {t} listed twice"))
                    );
                }
                participants[t as usize] = true;
            }
        }
    }
    Ok(participants)
}

/// `rate_per_s` as the `Op::Pace` interval in ns.
fn pace(rate_per_s: Option<f64>, at: &At) -> Result<Option<u32>, ConfigError> {
    let Some(r) = rate_per_s else {
        return Ok(None);
    };
    if !(r > 0.0 && r.is_finite()) {
        return Err(at.err("rate_per_s", format!("must be > 0, got {r}")));
    }
    let ns = 1e9 / r;
    if ns < 1.0 {
        return Err(at.err(
            "rate_per_s",
            format!("{r} accesses/s needs an interval below 1 ns"),
        ));
    }
    if ns.round() > u32::MAX as f64 {
        return Err(at.err(
            "rate_per_s",
            format!(
                "{r} accesses/s is too slow (interval above {} ns)",
                u32::MAX
            ),
        ));
    }
    Ok(Some(ns.round() as u32))
}

/// A per-thread key (`gap_cycles`, `pace_delay_ns`): one count for all, or an array of
/// exactly one per workload thread.
fn per_thread(
    key: &str,
    g: Option<PerThreadCount>,
    nthreads: u32,
    at: &At,
) -> Result<Vec<u32>, ConfigError> {
    Ok(match g {
        None => Vec::new(),
        Some(PerThreadCount::All(c)) => vec![c; nthreads as usize],
        Some(PerThreadCount::PerThread(v)) if v.len() == nthreads as usize => v,
        Some(PerThreadCount::PerThread(v)) => {
            let msg = format!(
                "has {} counts; give one per workload thread ({nthreads})",
                v.len()
            );
            return Err(at.err(key, msg));
        }
    })
}

fn writes(write: Option<bool>, fraction: Option<f64>, at: &At) -> Result<Writes, ConfigError> {
    Ok(match (write, fraction) {
        (Some(_), Some(_)) => {
            return Err(at.err("write_fraction", "give either write or write_fraction"))
        }
        (Some(true), None) => Writes::Always,
        (Some(false), None) | (None, None) => Writes::Never,
        (None, Some(f)) => {
            if !(0.0..=1.0).contains(&f) {
                return Err(at.err("write_fraction", format!("must be in [0, 1], got {f}")));
            }
            Writes::Fraction(f)
        }
    })
}

/// A touch phase's page order; `seed` shuffles a random order.
fn touch_order(
    order: Option<&str>,
    pages: u64,
    seed: u64,
    at: &At,
) -> Result<Pattern, ConfigError> {
    Ok(match order.unwrap_or("sequential") {
        "sequential" => Pattern::Seq,
        "reverse" => Pattern::Rev,
        "random" => {
            if pages > u32::MAX as u64 {
                return Err(at.err("pages", "too many pages for a random order"));
            }
            let mut perm: Vec<u32> = (0..pages as u32).collect();
            perm.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
            Pattern::Perm(perm.into())
        }
        o => {
            return Err(at.err(
                "order",
                format!("unknown order {o:?} (expected sequential, reverse or random)"),
            ))
        }
    })
}

/// A random phase's access count and page distribution over `pages` pages.
fn random_pattern(c: &RandomCfg, pages: u64, at: &At) -> Result<Pattern, ConfigError> {
    let count = match (c.count, c.duration_ms) {
        (Some(n), None) => n,
        (None, Some(d)) => {
            let Some(r) = c.rate_per_s else {
                return Err(at.err(
                    "duration_ms",
                    "duration_ms needs rate_per_s (the access count is duration × rate)",
                ));
            };
            if !(0.0..=MAX_DURATION_MS).contains(&d) {
                return Err(at.err(
                    "duration_ms",
                    format!("{d} is out of range ([0, {MAX_DURATION_MS}] ms)"),
                ));
            }
            (d * 1e-3 * r).round() as u64
        }
        (Some(_), Some(_)) => {
            return Err(at.err("count", "give either count or duration_ms, not both"))
        }
        (None, None) => return Err(at.err("count", "a `random` phase needs count or duration_ms")),
    };
    let hot_last = match c.hot.as_deref() {
        None | Some("first") => false,
        Some("last") => true,
        Some(h) => {
            return Err(at.err(
                "hot",
                format!("unknown hot end {h:?} (expected first or last)"),
            ))
        }
    };
    match c.distribution.as_deref().unwrap_or("uniform") {
        "uniform" => {
            if c.zipf_s.is_some() {
                return Err(at.err("zipf_s", "only used with distribution = \"zipf\""));
            }
            if c.hot.is_some() {
                return Err(at.err("hot", "only used with distribution = \"zipf\""));
            }
            Ok(Pattern::Uniform { count })
        }
        "zipf" => {
            let s = c.zipf_s.unwrap_or(0.99);
            if !(s > 0.0 && s.is_finite()) {
                return Err(at.err("zipf_s", format!("must be > 0, got {s}")));
            }
            Ok(Pattern::Zipf {
                count,
                cdf: zipf_cdf(pages, s),
                s,
                hot_last,
            })
        }
        d => Err(at.err(
            "distribution",
            format!("unknown distribution {d:?} (expected uniform or zipf)"),
        )),
    }
}

/// P(rank ≤ k) for ranks 0..pages with weight (k+1)^-s; the last entry is exactly 1.
fn zipf_cdf(pages: u64, s: f64) -> Arc<[f64]> {
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
    cdf.into()
}
