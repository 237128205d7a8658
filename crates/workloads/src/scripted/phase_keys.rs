//! The keys of a `[[workload.phases]]` entry, one struct per `kind`: serde rejects a key the
//! kind does not take and names it.
//!
//! The `kind` tag is dispatched here rather than by `#[serde(tag = "kind")]`: serde types an
//! internally tagged enum's fields from a buffer, so an error there would lose its key path
//! (`workload.phases[2]` instead of `workload.phases[2].count`). The shared keys are repeated per
//! struct because `#[serde(flatten)]` would turn `deny_unknown_fields` off.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use tierlab::config::{typed, ConfigError};

/// A per-thread key (`gap_cycles`, `pace_delay_ns`): one count for every thread, or one per
/// workload thread (an array).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum PerThreadCount {
    All(u32),
    PerThread(Vec<u32>),
}

impl<'de> Deserialize<'de> for PerThreadCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = PerThreadCount;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a cycle count, or an array of one count per workload thread")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PerThreadCount, E> {
                u32::try_from(v)
                    .map(PerThreadCount::All)
                    .map_err(|_| E::custom(format!("{v} is not a cycle count (0 to 2^32 - 1)")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PerThreadCount, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(-1))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<PerThreadCount, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element::<u32>()? {
                    v.push(x);
                }
                Ok(PerThreadCount::PerThread(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// One phase, by kind.
pub(super) enum PhaseCfg {
    Touch(TouchCfg),
    Random(RandomCfg),
    Stride(StrideCfg),
    Madvise(MadviseCfg),
    MovePages(MovePagesCfg),
    Mprotect(MprotectCfg),
    Mmap(RangeCfg),
    Munmap(RangeCfg),
    Sleep(SleepCfg),
    Barrier(BarrierCfg),
    Fork(ForkCfg),
    Wait(WaitCfg),
}

/// `kind = "touch"`: every page of the range once, by one thread unless `threads` says otherwise.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TouchCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub write: Option<bool>,
    pub order: Option<String>,
    pub rate_per_s: Option<f64>,
    pub gap_cycles: Option<PerThreadCount>,
}

/// `kind = "random"`: `count` (or `duration_ms` × `rate_per_s`) accesses per thread.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RandomCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub write: Option<bool>,
    pub write_fraction: Option<f64>,
    pub distribution: Option<String>,
    pub zipf_s: Option<f64>,
    pub hot: Option<String>,
    pub count: Option<u64>,
    pub duration_ms: Option<f64>,
    pub rate_per_s: Option<f64>,
    pub gap_cycles: Option<PerThreadCount>,
    /// Simulator only: where each thread's first pace slot falls, ns after the barrier that
    /// began the phase (`tierlab validate` sets it from the guest program's threads).
    pub pace_delay_ns: Option<PerThreadCount>,
}

/// `kind = "stride"`: one access every `stride_bytes` through the range.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StrideCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub write: Option<bool>,
    pub stride_bytes: Option<u64>,
    pub rate_per_s: Option<f64>,
    pub gap_cycles: Option<PerThreadCount>,
}

/// `kind = "madvise"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MadviseCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub advice: Option<String>,
}

/// `kind = "move_pages"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MovePagesCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub node: Option<u32>,
}

/// `kind = "mprotect"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MprotectCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub prot: Option<String>,
}

/// `kind = "mmap"` / `"munmap"`: the range of a region and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RangeCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub region: Option<String>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
}

/// `kind = "sleep"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SleepCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub ms: Option<f64>,
}

/// `kind = "barrier"`: no op; the threads only wait for each other.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BarrierCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
}

/// `kind = "fork"`: each participating worker forks `count` children; each runs the phases
/// `child` names, alone in its copy of the address space, and exits.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ForkCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub child: Option<Vec<String>>,
    pub count: Option<u64>,
}

/// `kind = "wait"`: each participating worker waits for the children it forked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitCfg {
    pub name: Option<String>,
    pub threads: Option<Vec<u32>>,
}

/// `region`, `offset_pages` and `pages`: the range a region kind works on.
pub(super) struct RangeKeys<'a> {
    pub region: Option<&'a str>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
}

/// How an access kind (touch, random, stride) accesses.
#[derive(Clone)]
pub(super) struct AccessKeys {
    pub write: Option<bool>,
    pub write_fraction: Option<f64>,
    pub rate_per_s: Option<f64>,
    pub gap_cycles: Option<PerThreadCount>,
    pub pace_delay_ns: Option<PerThreadCount>,
}

/// The keys several kinds share, whichever kind a phase is.
pub(super) struct Shared<'a> {
    pub name: Option<&'a String>,
    pub threads: Option<&'a [u32]>,
    /// `None` for the kinds without a region (sleep, barrier).
    pub range: Option<RangeKeys<'a>>,
    /// `None` for the kinds that make no loads or stores.
    pub access: Option<AccessKeys>,
}

impl PhaseCfg {
    /// Type phase `i`'s table as the struct its `kind` names.
    pub fn parse(mut table: toml::Table, i: usize, origin: &str) -> Result<Self, ConfigError> {
        let at = format!("workload.phases[{i}]");
        let Some(kind) = table.remove("kind") else {
            return Err(ConfigError::key(origin, &at, "missing field `kind`"));
        };
        let kind: String = typed(kind, origin, &format!("{at}.kind"))?;
        Ok(match kind.as_str() {
            "touch" => PhaseCfg::Touch(keys(table, &kind, &at, origin)?),
            "random" => PhaseCfg::Random(keys(table, &kind, &at, origin)?),
            "stride" => PhaseCfg::Stride(keys(table, &kind, &at, origin)?),
            "madvise" => PhaseCfg::Madvise(keys(table, &kind, &at, origin)?),
            "move_pages" => PhaseCfg::MovePages(keys(table, &kind, &at, origin)?),
            "mprotect" => PhaseCfg::Mprotect(keys(table, &kind, &at, origin)?),
            "mmap" => PhaseCfg::Mmap(keys(table, &kind, &at, origin)?),
            "munmap" => PhaseCfg::Munmap(keys(table, &kind, &at, origin)?),
            "sleep" => PhaseCfg::Sleep(keys(table, &kind, &at, origin)?),
            "barrier" => PhaseCfg::Barrier(keys(table, &kind, &at, origin)?),
            "fork" => PhaseCfg::Fork(keys(table, &kind, &at, origin)?),
            "wait" => PhaseCfg::Wait(keys(table, &kind, &at, origin)?),
            _ => {
                return Err(ConfigError::key(
                    origin,
                    format!("{at}.kind"),
                    format!(
                        "unknown phase kind {kind:?} (expected touch, random, stride, madvise, \
                         move_pages, mprotect, sleep, barrier, mmap, munmap, fork or wait)"
                    ),
                ))
            }
        })
    }

    /// The `kind` key.
    pub fn kind(&self) -> &'static str {
        match self {
            PhaseCfg::Touch(_) => "touch",
            PhaseCfg::Random(_) => "random",
            PhaseCfg::Stride(_) => "stride",
            PhaseCfg::Madvise(_) => "madvise",
            PhaseCfg::MovePages(_) => "move_pages",
            PhaseCfg::Mprotect(_) => "mprotect",
            PhaseCfg::Mmap(_) => "mmap",
            PhaseCfg::Munmap(_) => "munmap",
            PhaseCfg::Sleep(_) => "sleep",
            PhaseCfg::Barrier(_) => "barrier",
            PhaseCfg::Fork(_) => "fork",
            PhaseCfg::Wait(_) => "wait",
        }
    }

    /// Whether the phase runs on thread 0 alone unless `threads` lists others: the kinds a C
    /// benchmark does once (setup, a syscall), not once per thread.
    pub fn one_thread_by_default(&self) -> bool {
        !matches!(
            self,
            PhaseCfg::Random(_) | PhaseCfg::Stride(_) | PhaseCfg::Sleep(_) | PhaseCfg::Barrier(_)
        )
    }

    /// A `random` phase's `duration_ms` (its access count is duration × rate; a real program
    /// stops on the clock instead).
    pub fn duration_ms(&self) -> Option<f64> {
        match self {
            PhaseCfg::Random(c) => c.duration_ms,
            _ => None,
        }
    }

    /// The keys this phase has in common with other kinds.
    pub fn shared(&self) -> Shared<'_> {
        let (name, threads) = match self {
            PhaseCfg::Touch(c) => (&c.name, &c.threads),
            PhaseCfg::Random(c) => (&c.name, &c.threads),
            PhaseCfg::Stride(c) => (&c.name, &c.threads),
            PhaseCfg::Madvise(c) => (&c.name, &c.threads),
            PhaseCfg::MovePages(c) => (&c.name, &c.threads),
            PhaseCfg::Mprotect(c) => (&c.name, &c.threads),
            PhaseCfg::Mmap(c) | PhaseCfg::Munmap(c) => (&c.name, &c.threads),
            PhaseCfg::Sleep(c) => (&c.name, &c.threads),
            PhaseCfg::Barrier(c) => (&c.name, &c.threads),
            PhaseCfg::Fork(c) => (&c.name, &c.threads),
            PhaseCfg::Wait(c) => (&c.name, &c.threads),
        };
        let (range, access) = match self {
            PhaseCfg::Touch(c) => (
                range(&c.region, c.offset_pages, c.pages),
                access(c.write, None, c.rate_per_s, c.gap_cycles.clone(), None),
            ),
            PhaseCfg::Random(c) => (
                range(&c.region, c.offset_pages, c.pages),
                access(
                    c.write,
                    c.write_fraction,
                    c.rate_per_s,
                    c.gap_cycles.clone(),
                    c.pace_delay_ns.clone(),
                ),
            ),
            PhaseCfg::Stride(c) => (
                range(&c.region, c.offset_pages, c.pages),
                access(c.write, None, c.rate_per_s, c.gap_cycles.clone(), None),
            ),
            PhaseCfg::Madvise(c) => (range(&c.region, c.offset_pages, c.pages), None),
            PhaseCfg::MovePages(c) => (range(&c.region, c.offset_pages, c.pages), None),
            PhaseCfg::Mprotect(c) => (range(&c.region, c.offset_pages, c.pages), None),
            PhaseCfg::Mmap(c) | PhaseCfg::Munmap(c) => {
                (range(&c.region, c.offset_pages, c.pages), None)
            }
            PhaseCfg::Sleep(_) | PhaseCfg::Barrier(_) | PhaseCfg::Fork(_) | PhaseCfg::Wait(_) => {
                (None, None)
            }
        };
        Shared {
            name: name.as_ref(),
            threads: threads.as_deref(),
            range,
            access,
        }
    }
}

fn range(
    region: &Option<String>,
    offset_pages: Option<u64>,
    pages: Option<u64>,
) -> Option<RangeKeys<'_>> {
    Some(RangeKeys {
        region: region.as_deref(),
        offset_pages,
        pages,
    })
}

fn access(
    write: Option<bool>,
    write_fraction: Option<f64>,
    rate_per_s: Option<f64>,
    gap_cycles: Option<PerThreadCount>,
    pace_delay_ns: Option<PerThreadCount>,
) -> Option<AccessKeys> {
    Some(AccessKeys {
        write,
        write_fraction,
        rate_per_s,
        gap_cycles,
        pace_delay_ns,
    })
}

/// Type `table` as `kind`'s key struct `T`. Errors name the key, like `typed`, and the kind.
fn keys<T: DeserializeOwned>(
    table: toml::Table,
    kind: &str,
    at: &str,
    origin: &str,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let key = match e.path().to_string() {
            p if p == "." => at.to_string(),
            p => format!("{at}.{p}"),
        };
        let msg = e.inner().message();
        ConfigError::key(origin, key, format!("{msg} (kind = {kind:?})"))
    })
}
