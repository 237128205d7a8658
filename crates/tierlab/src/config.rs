//! Scenario configuration: TOML → typed config, with errors that name the file and the key.
//!
//! Kernel knobs use their sysctl names: `[vm] watermark_scale_factor` is
//! `/proc/sys/vm/watermark_scale_factor`, `[kernel] sched_base_slice_ns` is the scheduler's
//! base slice, `[x86] tlb_single_page_flush_ceiling` the debugfs knob of that name.
//! A scenario may name a machine preset (`machine_preset = "../machines/x.toml"`) whose
//! `[machine]` table is the base that the scenario's own `[machine]` keys override.

use crate::cost::CostTable;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// An error about one key of one file: `FILE: key `KEY`: MSG`.
    pub fn key(file: &str, key: impl fmt::Display, msg: impl fmt::Display) -> Self {
        ConfigError(format!("{file}: key `{key}`: {msg}"))
    }

    /// An error with no key to name (a whole file, a command-line argument).
    pub fn msg(msg: impl Into<String>) -> Self {
        ConfigError(msg.into())
    }

    /// The printed message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub scenario: ScenarioMeta,
    /// Path of a machine preset, relative to the scenario file (resolved before typing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_preset: Option<String>,
    pub machine: MachineConfig,
    #[serde(default)]
    pub vm: VmSysctl,
    #[serde(default)]
    pub kernel: KernelSysctl,
    #[serde(default)]
    pub x86: X86Knobs,
    #[serde(default)]
    pub sim: SimConfig,
    #[serde(default)]
    pub cost: CostTable,
    /// Test-only switches (deliberate breakage for checker tests).
    #[serde(default)]
    pub debug: DebugConfig,
    /// Interpreted by the workload crate (its `type` key picks the generator).
    pub workload: toml::Table,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScenarioMeta {
    pub name: String,
    pub description: String,
    /// Seed of every random choice in the run.
    pub seed: u64,
}

impl Default for ScenarioMeta {
    fn default() -> Self {
        ScenarioMeta {
            name: "unnamed".into(),
            description: String::new(),
            seed: 42,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default = "default_arch")]
    pub arch: String,
    /// Core clock: every CPU runs at this rate; simulated time is kept in these cycles.
    #[serde(default = "default_ghz")]
    pub cpu_ghz: f64,
    pub cpus: u32,
    /// Memory-level parallelism: how many misses overlap on average (latency is divided by it).
    #[serde(default = "default_mlp")]
    pub mlp: f64,
    #[serde(default)]
    pub tlb: TlbConfig,
    /// Per-CPU data cache filter (L2 plus a share of the LLC), KiB; 0 (the default) turns it
    /// off and every access pays its node's latency. It costs about a third of the
    /// simulator's speed, so it is opt-in for now.
    #[serde(default = "default_cache_kib")]
    pub cache_kib: u32,
    #[serde(default = "default_cache_ways")]
    pub cache_ways: u32,
    pub nodes: Vec<NodeConfig>,
    /// SLIT distances (`node_distance`), row per node; default 10 local, 20 remote.
    #[serde(default)]
    pub distance: Vec<Vec<u32>>,
}

fn default_name() -> String {
    "machine".into()
}
fn default_arch() -> String {
    "x86_64".into()
}
fn default_ghz() -> f64 {
    2.2
}
fn default_mlp() -> f64 {
    4.0
}
fn default_cache_kib() -> u32 {
    0
}
fn default_cache_ways() -> u32 {
    8
}

/// TLB geometry; defaults are a modern x86 server core (Intel Ice Lake/Sapphire Rapids-class).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlbConfig {
    pub dtlb_entries: u32,
    pub dtlb_ways: u32,
    pub itlb_entries: u32,
    pub itlb_ways: u32,
    pub stlb_entries: u32,
    pub stlb_ways: u32,
    /// PCIDs per CPU (TLB_NR_DYN_ASIDS).
    pub nr_dyn_asids: u32,
}

impl Default for TlbConfig {
    fn default() -> Self {
        TlbConfig {
            dtlb_entries: 64,
            dtlb_ways: 4,
            itlb_entries: 128,
            itlb_ways: 8,
            stlb_entries: 1536,
            stlb_ways: 12,
            nr_dyn_asids: 6,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    #[serde(default)]
    pub name: String,
    pub capacity_mib: u64,
    pub read_latency_ns: f64,
    pub write_latency_ns: f64,
    #[serde(default = "default_bw")]
    pub read_bandwidth_gbps: f64,
    #[serde(default = "default_bw")]
    pub write_bandwidth_gbps: f64,
    /// CPUs on this node, e.g. "0-15" or "0,2,4"; empty for a memory-only (CXL-like) node.
    #[serde(default)]
    pub cpus: String,
    /// Explicit abstract distance (memory_tiers); default: derived from latency and bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adistance: Option<u64>,
}

fn default_bw() -> f64 {
    100.0
}

/// `/proc/sys/vm/*` knobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VmSysctl {
    /// 0 means the kernel default (calculate_min_free_kbytes).
    pub min_free_kbytes: u64,
    pub watermark_scale_factor: u32,
    /// 0: auto-tuned pageset high; otherwise ≥ 8 (fixed high = managed / fraction / CPUs).
    pub percpu_pagelist_high_fraction: u32,
    /// vm.swappiness: the anon share of get_scan_count's SCAN_FRACT split.
    pub swappiness: u32,
    /// /sys/kernel/mm/numa/demotion_enabled (numa_demotion_enabled), off by default.
    pub demotion_enabled: bool,
    /// TPP (seed 003): a demotion watermark above high on top-tier nodes, in 1/10000 of the
    /// node (TPP's default is 200 = 2 %); kswapd demotes until free pages exceed it. 0 = off
    /// (upstream Linux has no such watermark).
    pub demote_scale_factor: u32,
}

impl Default for VmSysctl {
    fn default() -> Self {
        VmSysctl {
            min_free_kbytes: 0,
            watermark_scale_factor: 10,
            percpu_pagelist_high_fraction: 0,
            swappiness: 60,
            demotion_enabled: false,
            demote_scale_factor: 0,
        }
    }
}

/// `/proc/sys/kernel/*` and scheduler knobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelSysctl {
    /// EEVDF base slice (/sys/kernel/debug/sched/base_slice_ns), default 0.75 ms.
    pub sched_base_slice_ns: u64,
    /// kernel.numa_balancing: 0 off, 1 NUMA_BALANCING_NORMAL, 2 MEMORY_TIERING, 3 both.
    pub numa_balancing: u32,
    /// kernel.numa_balancing_promote_rate_limit_MBps
    #[serde(rename = "numa_balancing_promote_rate_limit_MBps")]
    pub numa_balancing_promote_rate_limit_mbps: u64,
    /// debugfs sched/numa_balancing/scan_delay_ms
    pub numa_balancing_scan_delay_ms: u64,
    pub numa_balancing_scan_period_min_ms: u64,
    pub numa_balancing_scan_period_max_ms: u64,
    pub numa_balancing_scan_size_mb: u64,
    /// debugfs sched/numa_balancing/hot_threshold_ms
    pub numa_balancing_hot_threshold_ms: u64,
    /// MIGRC (seed 000): defer the TLB flush of read-only migrated folios until their frames
    /// are reused. Not upstream; off by default. Accepts true/false or "on"/"off".
    #[serde(deserialize_with = "on_off")]
    pub migrc: bool,
    /// TPP (seed 003): promote a slow-tier page on a hint fault only if it is on the active
    /// LRU; otherwise mark it accessed so a later fault promotes it. Replaces the hot-threshold
    /// test of mode 2. Off by default.
    #[serde(deserialize_with = "on_off")]
    pub numa_balancing_active_lru_promotion: bool,
    /// The memory-tiering policy that decides promotions (tierlab's `policy/` registry:
    /// "linux" for upstream's hot threshold, "tpp"). Selecting one applies its knob defaults.
    pub tiering_policy: String,
}

/// A feature switch: a boolean, or the strings "on" / "off".
pub fn on_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Sw {
        B(bool),
        S(String),
    }
    match Sw::deserialize(d)? {
        Sw::B(b) => Ok(b),
        Sw::S(s) => match s.as_str() {
            "on" | "true" | "1" => Ok(true),
            "off" | "false" | "0" => Ok(false),
            _ => Err(serde::de::Error::custom(format!(
                "'{s}': expected on/off or true/false"
            ))),
        },
    }
}

/// Test-only ways to break MIGRC, to prove the invariant checker catches each hazard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrcBreak {
    #[default]
    None,
    /// Skip the deferred flush when a marked frame leaves pcp/buddy.
    AllocFlush,
    /// Skip the give-up flush when a read-only PTE becomes writable.
    UpgradeFlush,
    /// Skip munmap's TLB flush (the LUF pte_none hazard Dave Hansen raised).
    MunmapFlush,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DebugConfig {
    pub migrc_break: MigrcBreak,
}

impl Default for KernelSysctl {
    fn default() -> Self {
        KernelSysctl {
            tiering_policy: "linux".into(),
            sched_base_slice_ns: 750_000,
            numa_balancing: 0,
            numa_balancing_promote_rate_limit_mbps: 65536,
            numa_balancing_scan_delay_ms: 1000,
            numa_balancing_scan_period_min_ms: 1000,
            numa_balancing_scan_period_max_ms: 60000,
            numa_balancing_scan_size_mb: 256,
            numa_balancing_hot_threshold_ms: 1000,
            migrc: false,
            numa_balancing_active_lru_promotion: false,
        }
    }
}

/// NUMA_BALANCING_NORMAL / NUMA_BALANCING_MEMORY_TIERING bits of kernel.numa_balancing.
pub const NUMA_BALANCING_NORMAL: u32 = 1;
pub const NUMA_BALANCING_MEMORY_TIERING: u32 = 2;

/// x86 debugfs knobs (/sys/kernel/debug/x86/*).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct X86Knobs {
    pub tlb_single_page_flush_ceiling: u32,
}

impl Default for X86Knobs {
    fn default() -> Self {
        X86Knobs {
            tlb_single_page_flush_ceiling: 33,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckLevel {
    /// No invariant checking.
    Off,
    /// Full checks at every timeline sample and at the end.
    Periodic,
    /// Periodic checks plus a TLB scan on every frame allocation (tests, small machines).
    Strict,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Stop after this much simulated time (0 = run until every thread exits).
    pub max_seconds: f64,
    /// How far one CPU may run ahead before the engine switches to the CPU that is behind.
    pub quantum_ns: f64,
    /// Timeline sampling interval (simulated).
    pub timeline_interval_ms: f64,
    /// Invariant checking; unset means strict in debug builds and periodic in release builds.
    pub check: Option<CheckLevel>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            max_seconds: 0.0,
            quantum_ns: 5000.0,
            timeline_interval_ms: 100.0,
            check: None,
        }
    }
}

impl SimConfig {
    pub fn check_level(&self) -> CheckLevel {
        self.check.unwrap_or(if cfg!(debug_assertions) {
            CheckLevel::Strict
        } else {
            CheckLevel::Periodic
        })
    }
}

/// Parse "0-3,8,10-11" into CPU ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().map_err(|_| format!("bad CPU '{a}'"))?;
            let b: u32 = b.trim().parse().map_err(|_| format!("bad CPU '{b}'"))?;
            if b < a {
                return Err(format!("range {part} runs backwards"));
            }
            out.extend(a..=b);
        } else {
            out.push(part.parse().map_err(|_| format!("bad CPU '{part}'"))?);
        }
    }
    Ok(out)
}

/// Merge `over` into `base`: tables merge key by key, anything else replaces.
pub fn merge_toml(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge_toml(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Apply `key.path=value` (value parsed as TOML, or taken as a string if that fails). A numeric
/// segment indexes an array: `machine.nodes.1.capacity_mib=4096`.
pub fn apply_set(table: &mut toml::Table, assignment: &str) -> Result<(), ConfigError> {
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| ConfigError(format!("--set {assignment}: expected key=value")))?;
    let key = key.trim();
    let value = parse_value(raw.trim());
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return err(format!("--set {assignment}: empty key segment"));
    }
    let fail = |i: usize, why: &str| {
        err(format!(
            "--set {assignment}: `{}` {why}",
            parts[..=i].join(".")
        ))
    };
    fn set_in(
        v: &mut toml::Value,
        parts: &[&str],
        depth: usize,
        value: toml::Value,
    ) -> Result<(), (usize, &'static str)> {
        let p = parts[depth];
        let last = depth + 1 == parts.len();
        match v {
            toml::Value::Table(t) => {
                if last {
                    t.insert(p.to_string(), value);
                    return Ok(());
                }
                let next = t
                    .entry(p.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                set_in(next, parts, depth + 1, value)
            }
            toml::Value::Array(a) => {
                let i: usize = p
                    .parse()
                    .map_err(|_| (depth, "needs a numeric index into an array"))?;
                let Some(slot) = a.get_mut(i) else {
                    return Err((depth, "is past the end of the array"));
                };
                if last {
                    *slot = value;
                    return Ok(());
                }
                set_in(slot, parts, depth + 1, value)
            }
            _ => Err((depth.saturating_sub(1), "is not a table")),
        }
    }
    let mut root = toml::Value::Table(std::mem::take(table));
    let r = set_in(&mut root, &parts, 0, value);
    if let toml::Value::Table(t) = root {
        *table = t;
    }
    match r {
        Ok(()) => Ok(()),
        Err((i, why)) => fail(i, why),
    }
}

fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// The selected tiering policy's knob defaults go into the table where the scenario leaves
/// them unset; a knob that belongs to another policy is an error.
fn apply_policy_defaults(table: &mut toml::Table, origin: &str) -> Result<(), ConfigError> {
    const KEY: &str = "kernel.tiering_policy";
    let name = match lookup_key(table, KEY) {
        None => "linux".to_string(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(v) => return Err(ConfigError::key(origin, KEY, format!("{v} is not a name"))),
    };
    let policy = crate::policy::lookup(&name).map_err(|e| ConfigError::key(origin, KEY, e))?;
    for other in crate::policy::POLICIES
        .iter()
        .filter(|p| p.name != policy.name)
    {
        for knob in other.own_knobs {
            if !policy.own_knobs.contains(knob) && lookup_key(table, knob).is_some() {
                return Err(ConfigError::key(
                    origin,
                    knob,
                    format!(
                        "a knob of the `{}` tiering policy, but {KEY} is `{name}`",
                        other.name
                    ),
                ));
            }
        }
    }
    for (knob, value) in policy.knob_defaults {
        if lookup_key(table, knob).is_none() {
            apply_set(table, &format!("{knob}={value}"))?;
        }
    }
    Ok(())
}

/// The value at a dotted key of a table, if set.
fn lookup_key<'a>(table: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.');
    let mut v = table.get(parts.next()?)?;
    for p in parts {
        v = v.as_table()?.get(p)?;
    }
    Some(v)
}

/// Deserialize a TOML value into `T`, naming the failing key in the error.
pub fn typed<T: DeserializeOwned>(
    value: toml::Value,
    origin: &str,
    prefix: &str,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let key = match (prefix.is_empty(), path == ".") {
            (true, _) => path,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{path}"),
        };
        ConfigError(format!("{origin}: key `{key}`: {}", e.into_inner()))
    })
}

/// Read a TOML file into a table, naming the file and line on a syntax error.
pub fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("{}: cannot read: {e}", path.display())))?;
    text.parse::<toml::Table>()
        .map_err(|e| ConfigError(format!("{}: {e}", path.display())))
}

/// A scenario as loaded: the typed config plus where it came from.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub path: Option<PathBuf>,
    pub config: Config,
}

impl Config {
    /// Load a scenario file, resolve its machine preset, apply `--set` overrides, type and
    /// validate it.
    pub fn load(path: &Path, sets: &[String]) -> Result<Config, ConfigError> {
        let table = read_table(path)?;
        Self::from_table(table, &path.display().to_string(), path.parent(), sets)
    }

    /// Same as `load` for TOML text (built-in scenarios, tests).
    pub fn from_str_with(
        text: &str,
        origin: &str,
        base_dir: Option<&Path>,
        sets: &[String],
    ) -> Result<Config, ConfigError> {
        let table = text
            .parse::<toml::Table>()
            .map_err(|e| ConfigError(format!("{origin}: {e}")))?;
        Self::from_table(table, origin, base_dir, sets)
    }

    fn from_table(
        mut table: toml::Table,
        origin: &str,
        base_dir: Option<&Path>,
        sets: &[String],
    ) -> Result<Config, ConfigError> {
        for s in sets {
            apply_set(&mut table, s).map_err(|e| ConfigError(format!("{origin}: {e}")))?;
        }
        if let Some(toml::Value::String(preset)) = table.get("machine_preset").cloned() {
            let ppath = base_dir.unwrap_or(Path::new(".")).join(&preset);
            let mut ptable = read_table(&ppath)
                .map_err(|e| ConfigError(format!("{origin}: key `machine_preset`: {}", e.0)))?;
            let pmachine = match ptable.remove("machine") {
                Some(toml::Value::Table(t)) => t,
                _ => {
                    return err(format!(
                        "{}: a machine preset needs a [machine] table",
                        ppath.display()
                    ))
                }
            };
            let mut merged = pmachine;
            if let Some(toml::Value::Table(own)) = table.get("machine") {
                merge_toml(&mut merged, own);
            }
            table.insert("machine".into(), toml::Value::Table(merged));
        }
        apply_policy_defaults(&mut table, origin)?;
        let cfg: Config = typed(toml::Value::Table(table), origin, "")?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    /// Reject impossible machines and knob values, naming the key.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| err(format!("{origin}: key `{key}`: {msg}"));
        let m = &self.machine;
        if !(m.cpu_ghz > 0.0 && m.cpu_ghz < 20.0) {
            return bad(
                "machine.cpu_ghz",
                format!("{} is not a clock rate", m.cpu_ghz),
            );
        }
        if m.cpus == 0 || m.cpus > 256 {
            return bad(
                "machine.cpus",
                format!("{} CPUs (1..=256 supported)", m.cpus),
            );
        }
        if m.mlp.is_nan() || m.mlp < 1.0 {
            return bad("machine.mlp", "must be ≥ 1".into());
        }
        for (name, e, w) in [
            ("dtlb", m.tlb.dtlb_entries, m.tlb.dtlb_ways),
            ("itlb", m.tlb.itlb_entries, m.tlb.itlb_ways),
            ("stlb", m.tlb.stlb_entries, m.tlb.stlb_ways),
        ] {
            if w == 0 || w > 32 || e % w != 0 || !(e / w).is_power_of_two() {
                return bad(
                    &format!("machine.tlb.{name}_entries"),
                    format!("{e} entries in {w} ways: need ways in 1..=32 and a power-of-two number of sets"),
                );
            }
        }
        if m.cache_kib > 0 {
            let lines = (m.cache_kib as u64 * 1024) / 64;
            let w = m.cache_ways as u64;
            if w == 0
                || w > 32
                || !lines.is_multiple_of(w)
                || !(lines / w).is_power_of_two()
                || lines / w < 256
            {
                return bad(
                    "machine.cache_kib",
                    format!("{} KiB in {} ways: need ways in 1..=32 and a power-of-two number of sets ≥ 256", m.cache_kib, m.cache_ways),
                );
            }
        }
        if m.tlb.nr_dyn_asids == 0 || m.tlb.nr_dyn_asids > 255 {
            return bad("machine.tlb.nr_dyn_asids", "must be 1..=255".into());
        }
        if m.nodes.is_empty() {
            return bad(
                "machine.nodes",
                "a machine needs at least one memory node".into(),
            );
        }
        if m.nodes.len() > 64 {
            return bad("machine.nodes", "at most 64 nodes".into());
        }
        let mut owner = vec![None; m.cpus as usize];
        let mut total_pages = 0u64;
        for (i, n) in m.nodes.iter().enumerate() {
            let key = |k: &str| format!("machine.nodes[{i}].{k}");
            if n.capacity_mib < 16 {
                return bad(&key("capacity_mib"), "a node needs at least 16 MiB".into());
            }
            total_pages += n.capacity_mib * 256;
            for (k, v) in [
                ("read_latency_ns", n.read_latency_ns),
                ("write_latency_ns", n.write_latency_ns),
                ("read_bandwidth_gbps", n.read_bandwidth_gbps),
                ("write_bandwidth_gbps", n.write_bandwidth_gbps),
            ] {
                if !(v > 0.0 && v.is_finite()) {
                    return bad(&key(k), format!("{v} must be positive"));
                }
            }
            let cpus = match parse_cpu_list(&n.cpus) {
                Ok(c) => c,
                Err(e) => return bad(&key("cpus"), e),
            };
            for c in cpus {
                if c >= m.cpus {
                    return bad(
                        &key("cpus"),
                        format!("CPU {c} does not exist (machine.cpus = {})", m.cpus),
                    );
                }
                if let Some(prev) = owner[c as usize] {
                    return bad(&key("cpus"), format!("CPU {c} is already on node {prev}"));
                }
                owner[c as usize] = Some(i);
            }
        }
        if let Some(c) = owner.iter().position(|o| o.is_none()) {
            return bad("machine.nodes", format!("CPU {c} is on no node"));
        }
        if total_pages >= u32::MAX as u64 {
            return bad("machine.nodes", "more than 16 TiB of memory".into());
        }
        if !m.distance.is_empty() {
            let n = m.nodes.len();
            if m.distance.len() != n || m.distance.iter().any(|r| r.len() != n) {
                return bad("machine.distance", format!("must be a {n}×{n} matrix"));
            }
            for (i, row) in m.distance.iter().enumerate() {
                if row[i] != 10 {
                    return bad(
                        "machine.distance",
                        format!("node {i} to itself must be 10 (LOCAL_DISTANCE)"),
                    );
                }
                if row.iter().enumerate().any(|(j, &d)| j != i && d <= 10) {
                    return bad(
                        "machine.distance",
                        format!("row {i}: remote distances must exceed 10"),
                    );
                }
            }
        }
        if self.vm.watermark_scale_factor == 0 || self.vm.watermark_scale_factor > 3000 {
            return bad("vm.watermark_scale_factor", "range is 1..=3000".into());
        }
        let f = self.vm.percpu_pagelist_high_fraction;
        if f != 0 && f < 8 {
            return bad(
                "vm.percpu_pagelist_high_fraction",
                "must be 0 or ≥ 8".into(),
            );
        }
        if self.vm.demote_scale_factor > 3000 {
            return bad("vm.demote_scale_factor", "range is 0..=3000".into());
        }
        if self.vm.swappiness > 200 {
            return bad("vm.swappiness", "range is 0..=200".into());
        }
        if self.kernel.sched_base_slice_ns < 100_000 {
            return bad("kernel.sched_base_slice_ns", "below 0.1 ms".into());
        }
        if self.kernel.numa_balancing > 3 {
            return bad("kernel.numa_balancing", "range is 0..=3".into());
        }
        let k = &self.kernel;
        if k.numa_balancing_scan_size_mb == 0 {
            return bad("kernel.numa_balancing_scan_size_mb", "must be ≥ 1".into());
        }
        if k.numa_balancing_scan_period_min_ms == 0
            || k.numa_balancing_scan_period_max_ms < k.numa_balancing_scan_period_min_ms
        {
            return bad(
                "kernel.numa_balancing_scan_period_max_ms",
                "need 0 < scan_period_min_ms ≤ scan_period_max_ms".into(),
            );
        }
        if k.numa_balancing_hot_threshold_ms == 0 {
            return bad(
                "kernel.numa_balancing_hot_threshold_ms",
                "must be ≥ 1".into(),
            );
        }
        if self.x86.tlb_single_page_flush_ceiling == 0 {
            return bad("x86.tlb_single_page_flush_ceiling", "must be ≥ 1".into());
        }
        if self.sim.quantum_ns.is_nan() || self.sim.quantum_ns <= 0.0 {
            return bad("sim.quantum_ns", "must be positive".into());
        }
        if self.sim.timeline_interval_ms.is_nan() || self.sim.timeline_interval_ms <= 0.0 {
            return bad("sim.timeline_interval_ms", "must be positive".into());
        }
        if self.sim.max_seconds < 0.0 {
            return bad("sim.max_seconds", "must be ≥ 0".into());
        }
        if !self.workload.contains_key("type") {
            return bad(
                "workload.type",
                "missing: which workload generator to run".into(),
            );
        }
        Ok(())
    }

    /// CPUs of each node, parsed (validated already).
    pub fn node_cpus(&self) -> Vec<Vec<u32>> {
        self.machine
            .nodes
            .iter()
            .map(|n| parse_cpu_list(&n.cpus).unwrap_or_default())
            .collect()
    }

    /// node_distance(a, b): the SLIT, or 10 local / 20 remote.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        if self.machine.distance.is_empty() {
            if a == b {
                10
            } else {
                20
            }
        } else {
            self.machine.distance[a][b]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[machine]
cpus = 2
[[machine.nodes]]
capacity_mib = 64
read_latency_ns = 90
write_latency_ns = 90
cpus = "0-1"
[workload]
type = "none"
"#;

    #[test]
    fn parses_defaults_and_cpu_lists() {
        let c = Config::from_str_with(BASE, "t.toml", None, &[]).unwrap();
        assert_eq!(c.vm.watermark_scale_factor, 10);
        assert_eq!(c.machine.tlb.stlb_entries, 1536);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("3-1").is_err());
    }

    #[test]
    fn set_overrides_any_key() {
        let sets = [
            "vm.watermark_scale_factor=200".to_string(),
            "machine.nodes.0.capacity_mib=1".to_string(),
        ];
        // A numeric segment indexes an array; the new value is then validated like any other.
        let e = Config::from_str_with(BASE, "t.toml", None, &sets[1..]).unwrap_err();
        assert!(e.0.contains("machine.nodes[0].capacity_mib"), "{e}");
        let c = Config::from_str_with(
            BASE,
            "t.toml",
            None,
            &["machine.nodes.0.capacity_mib=128".into()],
        )
        .unwrap();
        assert_eq!(c.machine.nodes[0].capacity_mib, 128);
        let e = Config::from_str_with(BASE, "t.toml", None, &["machine.nodes.3.cpus=\"0\"".into()])
            .unwrap_err();
        assert!(e.0.contains("past the end"), "{e}");
        let c = Config::from_str_with(BASE, "t.toml", None, &sets[..1]).unwrap();
        assert_eq!(c.vm.watermark_scale_factor, 200);
    }

    #[test]
    fn unknown_keys_and_bad_types_name_the_key_and_file() {
        let e = Config::from_str_with(BASE, "s.toml", None, &["vm.watermark_scale_factr=3".into()])
            .unwrap_err();
        assert!(e.0.starts_with("s.toml: key `vm"), "{e}");
        assert!(e.0.contains("watermark_scale_factr"), "{e}");
        let e = Config::from_str_with(BASE, "s.toml", None, &["machine.cpus=\"many\"".into()])
            .unwrap_err();
        assert!(e.0.contains("machine.cpus"), "{e}");
    }

    #[test]
    fn impossible_machines_are_rejected_by_key() {
        let cases = [
            ("machine.cpus=3", "machine.nodes"),
            ("machine.tlb.dtlb_entries=60", "machine.tlb.dtlb_entries"),
            (
                "vm.percpu_pagelist_high_fraction=4",
                "vm.percpu_pagelist_high_fraction",
            ),
            ("machine.cpu_ghz=0", "machine.cpu_ghz"),
        ];
        for (set, key) in cases {
            let e = Config::from_str_with(BASE, "s.toml", None, &[set.into()]).unwrap_err();
            assert!(e.0.contains(key), "{set}: {e}");
        }
        let two_owners = BASE.replace("cpus = \"0-1\"", "cpus = \"0-2\"");
        let e = Config::from_str_with(&two_owners, "s.toml", None, &[]).unwrap_err();
        assert!(e.0.contains("machine.nodes[0].cpus"), "{e}");
    }
}
