//! Each `[[workload.phases]]` entry checked against the regions and threads and resolved to what
//! a participating thread does: one op, an access pattern, or nothing (a barrier).

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tierlab::config::ConfigError;
use tierlab::workload::{advice, Backing, Op};

use super::config::{allowed, parse_prot, present, PhaseCfg, REGION_KINDS};
use super::plan::{Access, Body, Pattern, PhasePlan, Region, Writes};
use super::{mix, Keyed, PAGE};

/// The phases, in definition order.
pub(super) struct Phases {
    /// Report names (explicit or derived from kind and region).
    pub names: Vec<String>,
    /// Phase index by name, for the loop groups.
    pub ids: HashMap<String, usize>,
    pub plans: Vec<PhasePlan>,
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
    let e = Keyed(origin);
    let mut names: Vec<String> = Vec::new();
    let mut phase_ids: HashMap<String, usize> = HashMap::new();
    let mut plans: Vec<PhasePlan> = Vec::new();
    for (i, p) in phases.iter().enumerate() {
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
            let r = regions
                .iter()
                .find(|r| r.name == name)
                .ok_or_else(|| e.at(key("region"), format!("unknown region {name:?}")))?;
            Some(r)
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
                    || phases.iter().any(|q| q.name.as_ref() == Some(&n))
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
    Ok(Phases {
        names,
        ids: phase_ids,
        plans,
    })
}
