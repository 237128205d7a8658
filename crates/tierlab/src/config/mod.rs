//! Scenario configuration: TOML → typed config, with errors that name the file and the key.
//!
//! Kernel knobs use their sysctl names: `[vm] watermark_scale_factor` is
//! `/proc/sys/vm/watermark_scale_factor`, `[kernel] sched_base_slice_ns` is the scheduler's
//! base slice, `[x86] tlb_single_page_flush_ceiling` the debugfs knob of that name. Each knob
//! is declared once (`knobs.rs`, `machine.rs`) with its default, range and kernel source.
//! A scenario may name a machine preset (`machine_preset = "../machines/x.toml"`) whose
//! `[machine]` table is the base that the scenario's own `[machine]` keys override.

mod error;
pub mod knob;
mod knobs;
mod limits;
mod machine;
mod validate;

pub use error::ConfigError;
pub use knob::{on_off, Knob, Range};
pub use knobs::{
    ArchKnobs, CheckLevel, DebugConfig, KernelSysctl, MigrcBreak, PcpSeries, ScenarioMeta,
    SimConfig, ThpDefrag, ThpEnabled, TlbBreak, VmSysctl, X86Knobs, NUMA_BALANCING_MEMORY_TIERING,
    NUMA_BALANCING_NORMAL,
};
pub use limits::{read_limited, MAX_CONFIG_BYTES};
pub use machine::{Arch, MachineConfig, NodeConfig, SwapConfig, TlbConfig};

use crate::cost::CostTable;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    pub arch: ArchKnobs,
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

/// Every declared knob with its full TOML key (`machine.nodes[].cpus` for node keys), in the
/// order a scenario file lists them.
pub fn all_knobs() -> Vec<(String, &'static Knob)> {
    let tables: [(&str, &'static [Knob]); 11] = [
        ("scenario", ScenarioMeta::KNOBS),
        ("machine", MachineConfig::KNOBS),
        ("machine.tlb", TlbConfig::KNOBS),
        ("machine.nodes[]", NodeConfig::KNOBS),
        ("machine.swap[]", SwapConfig::KNOBS),
        ("vm", VmSysctl::KNOBS),
        ("kernel", KernelSysctl::KNOBS),
        ("x86", X86Knobs::KNOBS),
        ("arch", ArchKnobs::KNOBS),
        ("sim", SimConfig::KNOBS),
        ("debug", DebugConfig::KNOBS),
    ];
    tables
        .into_iter()
        .flat_map(|(table, knobs)| {
            knobs
                .iter()
                .filter(|k| k.range != Range::Table)
                .map(move |k| (format!("{table}.{}", k.key), k))
        })
        .collect()
}

/// CPU ids a CPU list may name: `machine.cpus` is at most 256 (CpuMask holds 256 CPUs).
pub const MAX_CPU_ID: u32 = 255;

/// Parse "0-3,8,10-11" into CPU ids. Every id is checked against [`MAX_CPU_ID`] before a
/// range is expanded, so "0-4294967295" is an error, not four billion ids.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    let id = |t: &str| -> Result<u32, String> {
        let c: u32 = t
            .trim()
            .parse()
            .map_err(|_| format!("bad CPU '{}'", t.trim()))?;
        if c > MAX_CPU_ID {
            return Err(format!(
                "CPU {c} is out of range (0..={MAX_CPU_ID}: tierlab models at most 256 CPUs)"
            ));
        }
        Ok(c)
    };
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (id(a)?, id(b)?);
            if b < a {
                return Err(format!("range {part} runs backwards"));
            }
            out.extend(a..=b);
        } else {
            out.push(id(part)?);
        }
        // Repeated ranges cannot make the list longer than every id once per part of a
        // 256-CPU machine; anything longer names a CPU twice, which validation rejects.
        if out.len() > 4 * (MAX_CPU_ID as usize + 1) {
            return Err("names more CPUs than tierlab models (256), some several times".into());
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
/// segment indexes an array: `machine.nodes.1.capacity_mib=4096`. Errors carry no file; the
/// loader fills it in.
pub fn apply_set(table: &mut toml::Table, assignment: &str) -> Result<(), ConfigError> {
    let fail = |key: Option<String>, msg: &str| ConfigError::Set {
        file: String::new(),
        assignment: assignment.to_string(),
        key,
        msg: msg.to_string(),
    };
    let (key, raw) = assignment
        .split_once('=')
        .ok_or_else(|| fail(None, "expected key=value"))?;
    let value = parse_value(raw.trim());
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(fail(None, "empty key segment"));
    }
    // The deepest real key is 5 levels (machine.nodes.0.boot_pcp_count.3); a bound keeps
    // the recursive walk (and toml's recursive drop) off the end of the stack.
    if parts.len() > MAX_SET_DEPTH {
        return Err(fail(
            None,
            &format!(
                "key has {} levels; at most {MAX_SET_DEPTH} are allowed",
                parts.len()
            ),
        ));
    }
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
    r.map_err(|(i, why)| fail(Some(set_key(&parts[..=i].join("."))), why))
}

/// A `--set` key as errors spell it: `machine.nodes.0.cpus` → `machine.nodes[0].cpus`.
fn set_key(key: &str) -> String {
    let mut out = String::new();
    for part in key.trim().split('.') {
        if !out.is_empty() && part.parse::<usize>().is_ok() {
            out += &format!("[{part}]");
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out += part;
        }
    }
    out
}

/// Deepest `--set` key accepted (see `apply_set`).
pub const MAX_SET_DEPTH: usize = 16;

fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
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
            (true, true) => String::new(),
            (true, false) => path,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{path}"),
        };
        let msg = error::one_line(e.into_inner().message());
        match error::parse_unknown_field(&msg) {
            Some((name, expected)) => ConfigError::UnknownKey {
                file: origin.to_string(),
                // The path ends at the unknown key, or (inside arrays) at its table.
                key: match key.as_str() {
                    k if k == name || k.ends_with(&format!(".{name}")) => key,
                    "" => name,
                    k => format!("{k}.{name}"),
                },
                expected,
            },
            None => ConfigError::key(origin, key, msg),
        }
    })
}

/// Parse TOML text, naming the file and line on a syntax error.
fn parse_table(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>()
        .map_err(|e| ConfigError::Syntax {
            file: origin.to_string(),
            line: e.span().map(|s| error::line_of(text, s.start)),
            msg: error::one_line(e.message()),
        })
}

/// Read a TOML file into a table, naming the file and line on a syntax error.
pub fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let file = path.display().to_string();
    let text = read_limited(path, MAX_CONFIG_BYTES).map_err(|msg| ConfigError::Io {
        file: file.clone(),
        msg,
    })?;
    parse_table(&text, &file)
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
        Self::from_table(parse_table(text, origin)?, origin, base_dir, sets)
    }

    fn from_table(
        mut table: toml::Table,
        origin: &str,
        base_dir: Option<&Path>,
        sets: &[String],
    ) -> Result<Config, ConfigError> {
        for s in sets {
            apply_set(&mut table, s).map_err(|e| e.in_file(origin))?;
        }
        let mut preset_file = None;
        if let Some(toml::Value::String(preset)) = table.get("machine_preset").cloned() {
            let ppath = base_dir.unwrap_or(Path::new(".")).join(&preset);
            let mut ptable = read_table(&ppath)
                .map_err(|e| blame_set(ConfigError::key(origin, "machine_preset", e), sets))?;
            let pmachine = match ptable.remove("machine") {
                Some(toml::Value::Table(t)) => t,
                _ => {
                    return Err(ConfigError::msg(format!(
                        "{} (machine_preset of {origin}): a machine preset needs a [machine] table",
                        ppath.display()
                    )))
                }
            };
            let own = match table.get("machine") {
                Some(toml::Value::Table(own)) => own.clone(),
                _ => toml::Table::new(),
            };
            let mut merged = pmachine;
            merge_toml(&mut merged, &own);
            table.insert("machine".into(), toml::Value::Table(merged));
            preset_file = Some((ppath.display().to_string(), own));
        }
        apply_policy_defaults(&mut table, origin).map_err(|e| blame_set(e, sets))?;
        let checked = validate::check_required(&table, origin)
            .and_then(|()| typed::<Config>(toml::Value::Table(table), origin, ""))
            .and_then(|cfg| cfg.validate(origin).map(|()| cfg));
        checked.map_err(|e| match &preset_file {
            Some((preset, own)) => blame_set(blame_preset(e, preset, own, origin), sets),
            None => blame_set(e, sets),
        })
    }

    /// CPUs of each node, parsed (validated already).
    pub fn node_cpus(&self) -> Vec<Vec<u32>> {
        self.machine
            .nodes
            .iter()
            .map(|n| parse_cpu_list(&n.cpus).unwrap_or_default())
            .collect()
    }

    /// The rate a migration copies a page from node `src` to node `dst` at, GB/s: the copy
    /// engine's `copy_gbps` (the cost table's migrate_copy_gbps), or the nodes' bandwidth.
    pub fn migrate_copy_gbps(&self, src: usize, dst: usize, copy_gbps: f64) -> f64 {
        let nodes = &self.machine.nodes;
        (nodes[src].read_bandwidth_gbps)
            .min(nodes[dst].write_bandwidth_gbps)
            .min(copy_gbps)
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

/// A `machine.*` key error whose key the scenario's own `[machine]` does not set came from
/// the machine preset: name the preset file, and the scenario that chose it.
fn blame_preset(e: ConfigError, preset: &str, own: &toml::Table, origin: &str) -> ConfigError {
    let Some(key) = e.key_name() else {
        return e;
    };
    let Some(rest) = key.strip_prefix("machine.") else {
        return e;
    };
    let first = rest.split(['.', '[']).next().unwrap_or(rest);
    if own.contains_key(first) {
        return e;
    }
    e.in_preset(&format!("{preset} (machine_preset of {origin})"))
}

/// A key error whose key the last matching `--set` wrote (or lies inside what it wrote, or
/// holds what it wrote, or shares its table with it) is that `--set`'s fault, not the file's.
pub fn blame_set(e: ConfigError, sets: &[String]) -> ConfigError {
    let Some(key) = e.key_name().map(str::to_string) else {
        return e;
    };
    let inside = |outer: &str, inner: &str| {
        inner == outer
            || inner.starts_with(&format!("{outer}."))
            || inner.starts_with(&format!("{outer}["))
    };
    // The table holding a key: a rule between keys of one table (dtlb_entries and
    // dtlb_ways, scan_period_min and _max) is broken by a --set of either.
    let parent = |k: &str| k.rsplit_once('.').map(|(p, _)| p.to_string());
    let keys: Vec<(String, &String)> = sets
        .iter()
        .filter_map(|s| Some((set_key(s.split_once('=')?.0), s)))
        .collect();
    let culprit = keys
        .iter()
        .rev()
        .find(|(k, _)| inside(k, &key) || inside(&key, k))
        .or_else(|| {
            let p = parent(&key)?;
            keys.iter()
                .rev()
                .find(|(k, _)| parent(k).as_deref() == Some(&p))
        })
        .map(|(_, s)| *s);
    match culprit {
        Some(s) => e.blamed_on_set(s),
        None => e,
    }
}

#[cfg(test)]
mod tests;

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
            apply_set(table, &format!("{knob}={value}")).map_err(|e| e.in_file(origin))?;
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
