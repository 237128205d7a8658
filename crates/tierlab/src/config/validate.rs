//! Validation: every knob against its declared range, then the rules that tie several keys
//! together (cache and TLB geometry, CPU lists, node sizes, the distance matrix).

use super::knob::{Knob, Range};
use super::machine::{MachineConfig, NodeConfig, SwapConfig};
use super::{parse_cpu_list, Config, ConfigError};

/// The first required knob of `knobs` that `table` lacks.
fn missing(knobs: &[Knob], table: &toml::Table) -> Option<&'static str> {
    knobs
        .iter()
        .find(|k| k.required && !table.contains_key(k.key))
        .map(|k| k.key)
}

/// Required knobs must be written out; the typed structs fill gaps with defaults, so this
/// runs on the TOML before typing. Tables of the wrong type are left for serde to report.
pub(crate) fn check_required(table: &toml::Table, origin: &str) -> Result<(), ConfigError> {
    let Some(toml::Value::Table(machine)) = table.get("machine") else {
        return Ok(());
    };
    if let Some(key) = missing(MachineConfig::KNOBS, machine) {
        return Err(ConfigError::key(
            origin,
            format!("machine.{key}"),
            "missing",
        ));
    }
    for (list, knobs) in [("nodes", NodeConfig::KNOBS), ("swap", SwapConfig::KNOBS)] {
        if let Some(toml::Value::Array(items)) = machine.get(list) {
            for (i, item) in items.iter().enumerate() {
                if let toml::Value::Table(item) = item {
                    if let Some(key) = missing(knobs, item) {
                        return Err(ConfigError::key(
                            origin,
                            format!("machine.{list}[{i}].{key}"),
                            "missing",
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

impl Config {
    /// Reject knob values out of range and impossible machines, naming the key.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        self.check_ranges(origin)?;
        self.check_machine(origin)?;
        self.check_cost(origin)?;
        self.check_min_free(origin)?;
        let bad = |key: &str, msg: &str| Err(ConfigError::key(origin, key, msg));
        let k = &self.kernel;
        if k.numa_balancing_scan_period_max_ms < k.numa_balancing_scan_period_min_ms {
            return bad(
                "kernel.numa_balancing_scan_period_max_ms",
                "must be ≥ numa_balancing_scan_period_min_ms",
            );
        }
        if !matches!(self.arch.asid_bits, 8 | 16) {
            return bad(
                "arch.asid_bits",
                "must be 8 or 16 (ID_AA64MMFR0_EL1.ASIDBits)",
            );
        }
        if self.kernel.migrc && self.machine.arch != super::Arch::X86 {
            return bad(
                "kernel.migrc",
                "MIGRC is modelled on x86 only (v9's arm64 hooks carry no batch state)",
            );
        }
        if !self.workload.contains_key("type") {
            return bad("workload.type", "missing: which workload generator to run");
        }
        Ok(())
    }

    /// Every declared knob against its range.
    fn check_ranges(&self, origin: &str) -> Result<(), ConfigError> {
        let at = |table: String| {
            move |(key, why): (&str, String)| -> ConfigError {
                ConfigError::key(origin, format!("{table}.{key}"), why)
            }
        };
        self.scenario
            .check_ranges()
            .map_err(at("scenario".into()))?;
        self.machine.check_ranges().map_err(at("machine".into()))?;
        self.machine
            .tlb
            .check_ranges()
            .map_err(at("machine.tlb".into()))?;
        for (i, n) in self.machine.nodes.iter().enumerate() {
            n.check_ranges()
                .map_err(at(format!("machine.nodes[{i}]")))?;
        }
        for (i, s) in self.machine.swap.iter().enumerate() {
            s.check_ranges().map_err(at(format!("machine.swap[{i}]")))?;
        }
        if self.machine.swap.len() > 4 {
            return Err(ConfigError::key(
                origin,
                "machine.swap",
                format!(
                    "{} devices; tierlab's swap PTE has 2 type bits, so at most 4",
                    self.machine.swap.len()
                ),
            ));
        }
        self.vm.check_ranges().map_err(at("vm".into()))?;
        self.kernel.check_ranges().map_err(at("kernel".into()))?;
        self.x86.check_ranges().map_err(at("x86".into()))?;
        self.arch.check_ranges().map_err(at("arch".into()))?;
        self.sim.check_ranges().map_err(at("sim".into()))?;
        self.debug.check_ranges().map_err(at("debug".into()))?;
        Ok(())
    }

    /// Cache and TLB geometry, CPU ownership, node count and size, the SLIT.
    fn check_machine(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, msg: String| Err(ConfigError::key(origin, key, msg));
        let m = &self.machine;
        for (name, e, w) in [
            ("dtlb", m.tlb.dtlb_entries, m.tlb.dtlb_ways),
            ("dtlb_2m", m.tlb.dtlb_2m_entries, m.tlb.dtlb_2m_ways),
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
            let key = format!("machine.nodes[{i}].cpus");
            total_pages = total_pages.saturating_add(n.capacity_mib.saturating_mul(256));
            // The kernel's own share must leave the node room for its watermarks.
            if n.reserved_mib.saturating_add(16) > n.capacity_mib {
                return bad(
                    &format!("machine.nodes[{i}].reserved_mib"),
                    format!(
                        "{} MiB reserved leaves less than 16 MiB of the node's {} MiB",
                        n.reserved_mib, n.capacity_mib
                    ),
                );
            }
            for (k, len) in [
                ("boot_pcp_count", n.boot_pcp_count.len()),
                ("boot_pcp_high", n.boot_pcp_high.len()),
            ] {
                if len > m.cpus as usize {
                    return bad(
                        &format!("machine.nodes[{i}].{k}"),
                        format!("{len} entries for {} CPUs", m.cpus),
                    );
                }
            }
            if let Some(c) = n.kswapd_cpu.filter(|&c| c >= m.cpus) {
                return bad(
                    &format!("machine.nodes[{i}].kswapd_cpu"),
                    format!("CPU {c} does not exist (machine.cpus = {})", m.cpus),
                );
            }
            let boot_pcp: u64 = n.boot_pcp_count.iter().map(|&c| c as u64).sum();
            if (n.reserved_mib.saturating_add(16))
                .saturating_mul(256)
                .saturating_add(boot_pcp)
                > n.capacity_mib.saturating_mul(256)
            {
                return bad(
                    &format!("machine.nodes[{i}].boot_pcp_count"),
                    format!(
                        "{boot_pcp} pages on per-CPU lists and {} MiB reserved leave less than \
                         16 MiB of the node's {} MiB",
                        n.reserved_mib, n.capacity_mib
                    ),
                );
            }
            let cpus = match parse_cpu_list(&n.cpus) {
                Ok(c) => c,
                Err(e) => return bad(&key, e),
            };
            for c in cpus {
                if c >= m.cpus {
                    return bad(
                        &key,
                        format!("CPU {c} does not exist (machine.cpus = {})", m.cpus),
                    );
                }
                if let Some(prev) = owner[c as usize] {
                    return bad(&key, format!("CPU {c} is already on node {prev}"));
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
        self.check_distance(origin)
    }

    /// The cost table's real-valued figures: finite, not negative, and a copy engine that
    /// moves data (a rate of 0 or NaN would make every migration free or endless).
    fn check_cost(&self, origin: &str) -> Result<(), ConfigError> {
        let c = &self.cost;
        // A nanosecond figure above 1 s is no instruction or device cost tierlab charges.
        let ns = Range::between(0.0, 1e9);
        for (key, v, range) in [
            ("dsb_ish_base_ns", c.dsb_ish_base_ns, ns),
            ("dsb_ish_per_cpu_ns", c.dsb_ish_per_cpu_ns, ns),
            ("zram_compress_ns", c.zram_compress_ns, ns),
            ("zram_decompress_ns", c.zram_decompress_ns, ns),
            // As the nodes' bandwidth: 1 MB/s to 10 TB/s.
            (
                "migrate_copy_gbps",
                c.migrate_copy_gbps,
                Range::between(0.001, 10000.0),
            ),
        ] {
            if !range.admits_real(v) {
                return Err(ConfigError::key(
                    origin,
                    format!("cost.{key}"),
                    format!("{} is out of range ({range})", super::knob::real_text(v)),
                ));
            }
        }
        // Cycle counts: the dearest operation charged (execve) is 1e5 cycles; 1e8 (45 ms at
        // 2.2 GHz) is above any kernel path, and keeps a run's simulated time bounded.
        if let Ok(toml::Value::Table(t)) = toml::Value::try_from(c) {
            for (key, v) in &t {
                let max = if key.ends_with("_cycles") {
                    1e8
                } else if key.ends_with("_ns") {
                    // A major fault's I/O: 80 µs on NVMe, 10 ms on a disk; 1 s is a failure.
                    1e9
                } else {
                    continue;
                };
                if let Some(n) = v.as_integer().map(|i| i as f64).or(v.as_float()) {
                    if n > max {
                        return Err(ConfigError::key(
                            origin,
                            format!("cost.{key}"),
                            format!("{n} is out of range (0..={max:e})"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// vm.min_free_kbytes must leave the machine free pages: the kernel spreads it over the
    /// zones as their min watermark (__setup_per_zone_wmarks), so a reserve as large as the
    /// memory fails every allocation and ends in an OOM that would not name the knob.
    fn check_min_free(&self, origin: &str) -> Result<(), ConfigError> {
        let kib: u64 = self
            .machine
            .nodes
            .iter()
            .map(|n| {
                n.capacity_mib
                    .saturating_sub(n.reserved_mib)
                    .saturating_mul(1024)
            })
            .fold(0, u64::saturating_add);
        let v = self.vm.min_free_kbytes;
        if v >= kib {
            return Err(ConfigError::key(
                origin,
                "vm.min_free_kbytes",
                format!(
                    "{v} KiB is not below the machine's {kib} KiB (capacity_mib less reserved_mib): \
                     the min watermarks would leave no page to allocate"
                ),
            ));
        }
        Ok(())
    }

    /// The SLIT: n×n, LOCAL_DISTANCE on the diagonal, more than that elsewhere.
    fn check_distance(&self, origin: &str) -> Result<(), ConfigError> {
        let d = &self.machine.distance;
        if d.is_empty() {
            return Ok(());
        }
        let bad = |msg: String| Err(ConfigError::key(origin, "machine.distance", msg));
        let n = self.machine.nodes.len();
        if d.len() != n || d.iter().any(|r| r.len() != n) {
            return bad(format!("must be a {n}×{n} matrix"));
        }
        for (i, row) in d.iter().enumerate() {
            if row[i] != 10 {
                return bad(format!("node {i} to itself must be 10 (LOCAL_DISTANCE)"));
            }
            if row.iter().enumerate().any(|(j, &d)| j != i && d <= 10) {
                return bad(format!("row {i}: remote distances must exceed 10"));
            }
        }
        Ok(())
    }
}
