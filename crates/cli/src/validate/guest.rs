//! The guest runner: boot Debian's Linux 6.12 under QEMU on a machine that mirrors a
//! scenario's (one NUMA node per scenario node, CPU-less nodes included, with SLIT distances
//! and HMAT latencies and bandwidths so the kernel's memory_tiers code places the nodes in the
//! tiers tierlab does), apply sysctls, run one static program and hand back its stdout.
//!
//! What runs where:
//! - The host finds (or installs with apt) `qemu-system-x86_64` and a static busybox, and
//!   finds (or fetches with `apt-get download` + `dpkg-deb -x`, never into /boot) the newest
//!   `linux-image-6.12.*-amd64-unsigned` kernel, cached under `$XDG_CACHE_HOME/tierlab/kernel`
//!   (else `~/.cache/tierlab/kernel`). `GuestRun::kernel` or `$TIERLAB_KERNEL` overrides it.
//! - It writes a newc initramfs (busybox and its applet links, `/init`, the program as
//!   `/tierlab/<name>`, extra files) and boots it with `console=ttyS0`.
//! - `/init` mounts proc, sysfs, devtmpfs, debugfs and a tmpfs on /tmp; prints
//!   `TIERLAB-INIT`; writes each sysctl and prints `TIERLAB-SYSCTL path=value ok (reads …)` or
//!   `… failed: why` (a choice file whose bracketed choice is not the value written counts
//!   as failed); prints `TIERLAB-READ path=value` for each of `GuestRun::reads`; prints
//!   `TIERLAB-NODE` (MemTotal, CPUs, distances) per node and
//!   `TIERLAB-TIER` per memory tier (/sys/devices/virtual/memory_tiering); runs the program in
//!   /tierlab with its stdout on the second serial port (a file on the host, so kernel
//!   messages never mix into it) and stderr on the console; prints `TIERLAB-EXIT code=N`; and
//!   powers off.
//!
//! Timing (measured on a 2-core host, Debian 6.12.117, QEMU 7.2): under TCG with
//! `-icount shift=0,sleep=off` the guest is deterministic and runs at one guest instruction
//! per virtual ns. A 1-CPU machine with 2 × 256 MiB reaches /init after 1.95 s of guest time,
//! 6.8–7.6 s of wall time, the whole smoke run taking ≈8 s; 4 CPUs with 1.25 GiB reach it
//! after 2.5 s guest / 12 s wall; 16 CPUs with 10 GiB after 4.0 s guest / 29 s wall. KVM is
//! faster where it works (see [`Accel::Kvm`]).

use super::cpio::Cpio;
use super::ftrace::{self, Ftrace};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tierlab::config::parse_cpu_list;
use tierlab::Config;

/// How QEMU runs the guest's CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Binary translation (`-cpu max,-rdrand,-rdseed`) with `-icount shift=0,sleep=off` and
    /// the RTC on the virtual clock: deterministic (the guest executes the same instruction
    /// stream against a virtual clock of 1 ns per instruction; two boots print the same
    /// console, timestamps included), independent of host load; 3.5–7.5 s of wall time per
    /// second of guest time (more with more vCPUs, which run one at a time).
    Tcg,
    /// Hardware virtualization (`-accel kvm -cpu host`): near native speed, not
    /// deterministic, and timing depends on the host. Needs a usable /dev/kvm: on a host
    /// whose KVM is itself nested or paravirtualized (e.g. PVM) a stock kernel may not boot.
    Kvm,
}

impl Accel {
    /// Whether KVM can boot a stock kernel here, as far as can be told without booting:
    /// /dev/kvm opens for reading and writing, and the hypervisor behind it is hardware KVM
    /// (kvm_intel or kvm_amd), not PVM (kvm_pvm, a paravirtualized nested KVM on which
    /// Debian's kernel does not boot: QEMU 7.2 aborts setting MSR 0x10a with `-cpu host`, and
    /// with `-arch-capabilities` the decompressor dies in an emulation failure).
    pub fn kvm_usable() -> Result<(), String> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .map_err(|e| format!("/dev/kvm: {e}"))?;
        let loaded = |m: &str| Path::new("/sys/module").join(m).exists();
        if loaded("kvm_pvm") && !loaded("kvm_intel") && !loaded("kvm_amd") {
            return Err(
                "this host's KVM is PVM (kvm_pvm), which does not boot a stock kernel".into(),
            );
        }
        Ok(())
    }
}

/// One NUMA node of the guest.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestNode {
    pub mib: u64,
    /// CPUs on the node; empty for a CPU-less (CXL-like) node.
    pub cpus: Vec<u32>,
    pub read_latency_ns: f64,
    pub write_latency_ns: f64,
    pub read_bandwidth_gbps: f64,
    pub write_bandwidth_gbps: f64,
}

/// The machine QEMU emulates.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestMachine {
    pub cpus: u32,
    pub nodes: Vec<GuestNode>,
    /// SLIT distances, one row per node; empty = 10 local, 20 remote.
    pub distance: Vec<Vec<u32>>,
    pub accel: Accel,
}

/// What to run in the guest.
#[derive(Clone, Debug)]
pub struct GuestRun {
    /// (path, value): a path under /proc/sys or /sys, or a dotted sysctl name
    /// (`vm.watermark_scale_factor` = /proc/sys/vm/watermark_scale_factor). Written in order.
    pub sysctls: Vec<(String, String)>,
    /// A static x86-64 ELF binary; it runs as /tierlab/<file name> with /tierlab as its cwd.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// (guest path, host file) copied into the initramfs; a relative guest path is taken
    /// under /tierlab. Not under /tmp, /proc, /sys or /dev, which are mounted over.
    pub files: Vec<(String, PathBuf)>,
    /// Kill QEMU after this much wall time.
    pub timeout: Duration,
    /// A kernel image (bzImage) to boot instead of the cached Debian 6.12 one.
    pub kernel: Option<PathBuf>,
    /// Extra kernel command-line parameters.
    pub cmdline: Vec<String>,
    /// Trace the program's run with these kprobes and tracepoints.
    pub ftrace: Option<Ftrace>,
    /// Files under /proc/sys or /sys that /init reads after the sysctls (`TIERLAB-READ`),
    /// for values the kernel derives from them (min_free_kbytes once THP is on).
    pub reads: Vec<String>,
    /// /init sleeps this long (`usleep`) just before the program: where the program starts
    /// against the guest's ticks (`validate --start-jitter`). 0: no sleep.
    pub start_delay_us: u32,
}

impl GuestRun {
    /// A run of `program` with no sysctls, arguments or files and a 10-minute timeout.
    pub fn new(program: impl Into<PathBuf>) -> GuestRun {
        GuestRun {
            sysctls: Vec::new(),
            program: program.into(),
            args: Vec::new(),
            files: Vec::new(),
            timeout: Duration::from_secs(600),
            kernel: None,
            cmdline: Vec::new(),
            ftrace: None,
            reads: Vec::new(),
            start_delay_us: 0,
        }
    }
}

/// A sysctl as the guest reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct SysctlResult {
    pub path: String,
    pub value: String,
    pub ok: bool,
    /// What the file read back after the write (ok), or the shell's error (failed).
    pub detail: String,
}

/// A NUMA node as the guest saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestNodeInfo {
    pub id: u32,
    pub memtotal_kib: u64,
    /// MemFree when /init started, before any sysctl or the program ran.
    pub memfree_kib: u64,
    /// Free pages on each CPU's per-CPU lists of the node's zones, and their `high` limits,
    /// by CPU id, right after MemFree was read (`/proc/zoneinfo` pagesets; not in MemFree).
    pub pcp_count: Vec<u64>,
    pub pcp_high: Vec<u64>,
    /// The CPU the node's kswapd last ran on at /init.
    pub kswapd_cpu: Option<u32>,
    /// /sys/devices/system/node/nodeN/cpulist.
    pub cpus: String,
    pub distance: Vec<u32>,
    /// The N of the /sys/devices/virtual/memory_tiering/memory_tierN holding the node
    /// (its abstract distance >> 7: DRAM is 4), if any.
    pub tier: Option<u32>,
}

/// What a guest run produced.
#[derive(Clone, Debug)]
pub struct GuestOutput {
    /// The program's stdout, line by line.
    pub stdout_lines: Vec<String>,
    /// The guest's ftrace lines (GuestRun::ftrace), prefix removed.
    pub trace_lines: Vec<String>,
    /// Probes or events the guest refused (`TIERLAB-FTRACE` console lines).
    pub ftrace_errors: Vec<String>,
    /// The full serial console log (kernel messages, /init's report, the program's stderr).
    pub console: String,
    /// Host wall time from starting QEMU to its exit.
    pub wall_seconds: f64,
    /// Host wall time from starting QEMU to /init's first line.
    pub init_wall_seconds: f64,
    /// Guest uptime when /init started (/proc/uptime).
    pub boot_seconds: f64,
    /// Guest time the program ran (/proc/uptime before and after; 10 ms resolution).
    pub program_seconds: f64,
    pub exit_code: i32,
    /// `uname -r` in the guest.
    pub kernel_release: String,
    pub sysctls: Vec<SysctlResult>,
    pub nodes: Vec<GuestNodeInfo>,
    /// `GuestRun::reads` as (path, what it read after the sysctls), in order.
    pub reads: Vec<(String, String)>,
}

impl GuestOutput {
    /// The tier of every node, in node order.
    pub fn tiers(&self) -> Vec<Option<u32>> {
        self.nodes.iter().map(|n| n.tier).collect()
    }

    /// What /init read from `path` after the sysctls (`GuestRun::reads`).
    pub fn read(&self, path: &str) -> Option<&str> {
        (self.reads.iter())
            .find(|(p, _)| p == path)
            .map(|(_, v)| v.as_str())
    }

    /// The sysctls that failed, as "path=value: why".
    pub fn failed_sysctls(&self) -> Vec<String> {
        self.sysctls
            .iter()
            .filter(|s| !s.ok)
            .map(|s| format!("{}={}: {}", s.path, s.value, s.detail))
            .collect()
    }
}

/// MEMTIER_ADISTANCE_DRAM and MEMTIER_CHUNK_BITS of mm/memory-tiers.c.
const ADISTANCE_DRAM: u64 = 4 * 128 + 64;
const CHUNK_BITS: u32 = 7;

/// One HMAT System Locality Latency and Bandwidth entry pair set, as QEMU is given it and the
/// kernel reads it: latencies in ns, bandwidths in MB/s (QEMU's MiB/s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HmatEntry {
    pub initiator: usize,
    pub target: usize,
    pub read_latency_ns: u64,
    pub write_latency_ns: u64,
    pub read_bandwidth_mbps: u64,
    pub write_bandwidth_mbps: u64,
}

impl GuestMachine {
    /// The scenario's machine: its CPUs, nodes, distances. A node with an explicit
    /// `adistance` gets the reference DRAM node's bandwidths and latencies scaled by
    /// adistance / 576, which the kernel's mt_perf_to_adistance maps back to that distance.
    pub fn from_config(cfg: &Config, accel: Accel) -> Result<GuestMachine, String> {
        let m = &cfg.machine;
        let mut nodes = Vec::new();
        for (i, n) in m.nodes.iter().enumerate() {
            let cpus =
                parse_cpu_list(&n.cpus).map_err(|e| format!("machine.nodes[{i}].cpus: {e}"))?;
            nodes.push(GuestNode {
                mib: n.capacity_mib,
                cpus,
                read_latency_ns: n.read_latency_ns,
                write_latency_ns: n.write_latency_ns,
                read_bandwidth_gbps: n.read_bandwidth_gbps,
                write_bandwidth_gbps: n.write_bandwidth_gbps,
            });
        }
        if let Some(r) = nodes.iter().position(|n| !n.cpus.is_empty()) {
            let reference = nodes[r].clone();
            for (i, n) in m.nodes.iter().enumerate() {
                if let (Some(a), true) = (n.adistance, i != r) {
                    let scale = a as f64 / ADISTANCE_DRAM as f64;
                    let g = &mut nodes[i];
                    g.read_latency_ns = reference.read_latency_ns * scale;
                    g.write_latency_ns = reference.write_latency_ns * scale;
                    g.read_bandwidth_gbps = reference.read_bandwidth_gbps;
                    g.write_bandwidth_gbps = reference.write_bandwidth_gbps;
                }
            }
        }
        let machine = GuestMachine {
            cpus: m.cpus,
            nodes,
            distance: m.distance.clone(),
            accel,
        };
        machine.check()?;
        Ok(machine)
    }

    /// The rules QEMU enforces, checked up front for a clear message.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() {
            return Err("the guest machine has no nodes".into());
        }
        if self.cpus == 0 {
            return Err("the guest machine has no CPUs".into());
        }
        let mut seen = BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.mib == 0 {
                return Err(format!("node {i} has no memory"));
            }
            for &c in &n.cpus {
                if c >= self.cpus {
                    return Err(format!(
                        "node {i} lists CPU {c}, but there are {} CPUs",
                        self.cpus
                    ));
                }
                if !seen.insert(c) {
                    return Err(format!("CPU {c} is on two nodes"));
                }
            }
            let perf = [
                n.read_latency_ns,
                n.write_latency_ns,
                n.read_bandwidth_gbps,
                n.write_bandwidth_gbps,
            ];
            if perf.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(format!(
                    "node {i}: latencies and bandwidths must be positive"
                ));
            }
        }
        if self.nodes.iter().all(|n| n.cpus.is_empty()) {
            return Err("no node has CPUs".into());
        }
        let n = self.nodes.len();
        if !self.distance.is_empty()
            && (self.distance.len() != n || self.distance.iter().any(|r| r.len() != n))
        {
            return Err(format!("the distance table is not {n}×{n}"));
        }
        Ok(())
    }

    pub fn total_mib(&self) -> u64 {
        self.nodes.iter().map(|n| n.mib).sum()
    }

    /// node_distance(a, b): the table, or 10 local / 20 remote.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        if self.distance.is_empty() {
            if a == b {
                10
            } else {
                20
            }
        } else {
            self.distance[a][b]
        }
    }

    /// The nodes with CPUs: the HMAT initiators.
    pub fn initiators(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| !self.nodes[i].cpus.is_empty())
            .collect()
    }

    /// The HMAT, initiator-major. A target seen from its nearest initiator has its own
    /// latency and bandwidth; from an initiator `d` times as far (by SLIT distance),
    /// `d` times the latency and 1/d the bandwidth. Bandwidths are rounded to a common
    /// power-of-two base per table so each fits HMAT's 16-bit entries, as QEMU requires.
    pub fn hmat(&self) -> Vec<HmatEntry> {
        let inits = self.initiators();
        let mut out = Vec::new();
        for &i in &inits {
            for (t, node) in self.nodes.iter().enumerate() {
                let nearest = inits
                    .iter()
                    .map(|&j| self.distance(j, t))
                    .min()
                    .unwrap_or(10)
                    .max(1);
                let f = self.distance(i, t) as f64 / nearest as f64;
                let lat = |ns: f64| ((ns * f).round() as u64).clamp(1, 65_534);
                let bw = |gbps: f64| ((gbps * 1000.0 / f).round() as u64).max(1);
                out.push(HmatEntry {
                    initiator: i,
                    target: t,
                    read_latency_ns: lat(node.read_latency_ns),
                    write_latency_ns: lat(node.write_latency_ns),
                    read_bandwidth_mbps: bw(node.read_bandwidth_gbps),
                    write_bandwidth_mbps: bw(node.write_bandwidth_gbps),
                });
            }
        }
        let quantize = |vals: Vec<&mut u64>| {
            let max = vals.iter().map(|v| **v).max().unwrap_or(1);
            let mut base = 1u64;
            while max / base >= 65_535 {
                base *= 2;
            }
            for v in vals {
                *v = ((*v as f64 / base as f64).round() as u64).max(1) * base;
            }
        };
        quantize(out.iter_mut().map(|e| &mut e.read_bandwidth_mbps).collect());
        quantize(
            out.iter_mut()
                .map(|e| &mut e.write_bandwidth_mbps)
                .collect(),
        );
        out
    }

    /// The memory tier (memory_tierN, N = abstract distance >> 7) Linux 6.12 puts each node
    /// in from this HMAT: nodes with CPUs in the default DRAM tier (4); a CPU-less node at
    /// mt_perf_to_adistance() of its best access coordinates relative to the first CPU node
    /// (integer arithmetic, left to right, as the kernel does it); every node in tier 4 if the
    /// CPU nodes' performance differs by more than 10% (the kernel then distrusts HMAT).
    pub fn expected_tiers(&self) -> Vec<u32> {
        let hmat = self.hmat();
        let best = |t: usize| -> [u64; 4] {
            let es = hmat.iter().filter(|e| e.target == t);
            let mut p = [u64::MAX, u64::MAX, 0, 0];
            for e in es {
                p[0] = p[0].min(e.read_latency_ns);
                p[1] = p[1].min(e.write_latency_ns);
                p[2] = p[2].max(e.read_bandwidth_mbps);
                p[3] = p[3].max(e.write_bandwidth_mbps);
            }
            p
        };
        let dram_tier = (ADISTANCE_DRAM >> CHUNK_BITS) as u32;
        let inits = self.initiators();
        let dram = best(inits[0]);
        let mismatch = inits.iter().any(|&i| {
            let p = best(i);
            (0..4).any(|k| p[k].abs_diff(dram[k]) * 10 > dram[k])
        });
        (0..self.nodes.len())
            .map(|t| {
                if mismatch || !self.nodes[t].cpus.is_empty() {
                    return dram_tier;
                }
                let p = best(t);
                let adist = ADISTANCE_DRAM * (p[0] + p[1]) / (dram[0] + dram[1])
                    * (dram[2] + dram[3])
                    / (p[2] + p[3]);
                (adist >> CHUNK_BITS) as u32
            })
            .collect()
    }

    /// QEMU's command line (without the binary): the machine, its NUMA nodes, distances and
    /// HMAT, the kernel and initramfs, the console on stdio and the second serial port
    /// (the program's stdout) in `stdout_file`.
    pub fn qemu_args(
        &self,
        kernel: &Path,
        initrd: &Path,
        append: &str,
        stdout_file: &Path,
    ) -> Vec<String> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |parts: &[&str]| a.extend(parts.iter().map(|s| s.to_string()));
        push(&["-machine", "q35,hmat=on"]);
        match self.accel {
            Accel::Tcg => push(&[
                "-accel",
                "tcg",
                "-icount",
                "shift=0,sleep=off",
                "-cpu",
                "max,-rdrand,-rdseed",
                "-rtc",
                "base=2024-01-01T00:00:00,clock=vm",
            ]),
            Accel::Kvm => push(&["-accel", "kvm", "-cpu", "host"]),
        }
        push(&[
            "-smp",
            &self.cpus.to_string(),
            "-m",
            &format!("{}M", self.total_mib()),
        ]);
        let inits = self.initiators();
        for (i, n) in self.nodes.iter().enumerate() {
            push(&[
                "-object",
                &format!("memory-backend-ram,id=m{i},size={}M", n.mib),
            ]);
            let mut node = format!("node,nodeid={i},memdev=m{i}");
            for (lo, hi) in ranges(&n.cpus) {
                node += &if lo == hi {
                    format!(",cpus={lo}")
                } else {
                    format!(",cpus={lo}-{hi}")
                };
            }
            if n.cpus.is_empty() {
                // hmat=on wants every memory-only node's nearest initiator named.
                let init = inits
                    .iter()
                    .copied()
                    .min_by_key(|&j| (self.distance(j, i), j))
                    .unwrap_or(0);
                node += &format!(",initiator={init}");
            }
            push(&["-numa", &node]);
        }
        for i in 0..self.nodes.len() {
            for j in 0..self.nodes.len() {
                if i != j {
                    let d = self.distance(i, j);
                    push(&["-numa", &format!("dist,src={i},dst={j},val={d}")]);
                }
            }
        }
        for e in self.hmat() {
            let (i, t) = (e.initiator, e.target);
            let lb = |ty: &str, what: &str| {
                format!("hmat-lb,initiator={i},target={t},hierarchy=memory,data-type={ty},{what}")
            };
            push(&[
                "-numa",
                &lb("read-latency", &format!("latency={}", e.read_latency_ns)),
            ]);
            push(&[
                "-numa",
                &lb("write-latency", &format!("latency={}", e.write_latency_ns)),
            ]);
            push(&[
                "-numa",
                &lb(
                    "read-bandwidth",
                    &format!("bandwidth={}M", e.read_bandwidth_mbps),
                ),
            ]);
            push(&[
                "-numa",
                &lb(
                    "write-bandwidth",
                    &format!("bandwidth={}M", e.write_bandwidth_mbps),
                ),
            ]);
        }
        push(&[
            "-kernel",
            &kernel.display().to_string(),
            "-initrd",
            &initrd.display().to_string(),
            "-append",
            append,
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-serial",
            &format!("file:{}", stdout_file.display()),
            "-no-reboot",
        ]);
        a
    }
}

/// Consecutive runs of a sorted-or-not CPU list, as (first, last).
fn ranges(cpus: &[u32]) -> Vec<(u32, u32)> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for c in v {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == c => *hi = c,
            _ => out.push((c, c)),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Host side: tools and kernel.

/// The kernel to boot and what is known about it.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub image: PathBuf,
    /// The build's config (boot/config-<release>), if it was found beside the image.
    pub config: Option<PathBuf>,
    /// The release string from the image's name (vmlinuz-<release>), if it has that form.
    pub release: String,
}

/// Host binaries the runner needs.
#[derive(Clone, Debug)]
pub struct Tools {
    pub qemu: PathBuf,
    /// A statically linked busybox.
    pub busybox: PathBuf,
}

/// Options the kernel must have built in (=y): NUMA with ACPI SRAT/SLIT/HMAT, memory tiers
/// (mm/memory-tiers.o is built with NUMA and MIGRATION), NUMA balancing, MGLRU, the 8250
/// serial console, initramfs, devtmpfs, tmpfs, debugfs and THP.
pub const REQUIRED_CONFIG: &[&str] = &[
    "CONFIG_NUMA",
    "CONFIG_ACPI_NUMA",
    "CONFIG_ACPI_HMAT",
    "CONFIG_MIGRATION",
    "CONFIG_NUMA_BALANCING",
    "CONFIG_LRU_GEN",
    "CONFIG_TRANSPARENT_HUGEPAGE",
    "CONFIG_SERIAL_8250",
    "CONFIG_SERIAL_8250_CONSOLE",
    "CONFIG_BLK_DEV_INITRD",
    "CONFIG_DEVTMPFS",
    "CONFIG_TMPFS",
    "CONFIG_DEBUG_FS",
];

/// `$XDG_CACHE_HOME/tierlab`, else `~/.cache/tierlab`.
pub fn cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("tierlab");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("tierlab")
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Run a command; its combined output on failure.
fn run_cmd(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            tail(&text, 15)
        ))
    }
}

/// `apt-get install` the packages (as root), updating the package lists once if the first
/// try fails.
fn apt_install(pkgs: &[&str], progress: &mut dyn FnMut(&str)) -> Result<(), String> {
    if !is_root() {
        return Err(format!(
            "not root, so not installing; run: apt-get install {}",
            pkgs.join(" ")
        ));
    }
    if find_in_path("apt-get").is_none() {
        return Err(format!("no apt-get to install {} with", pkgs.join(" ")));
    }
    progress(&format!("installing {} with apt-get", pkgs.join(" ")));
    let install = || {
        run_cmd(
            Command::new("apt-get")
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(pkgs),
        )
    };
    if install().is_ok() {
        return Ok(());
    }
    progress("apt-get install failed; running apt-get update and trying again");
    run_cmd(Command::new("apt-get").args(["update", "-q"]))?;
    install().map(|_| ())
}

/// Why an ELF file is not a static x86-64 executable, if it is not one.
pub fn check_static_x86_64(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    if u16_at(18) != 62 {
        return Err(format!(
            "built for ELF machine {}, not x86-64 (62)",
            u16_at(18)
        ));
    }
    let (phoff, phentsize, phnum) = (
        u64_at(32) as usize,
        u16_at(54) as usize,
        u16_at(56) as usize,
    );
    for k in 0..phnum {
        let o = phoff + k * phentsize;
        if o + 4 > bytes.len() {
            return Err("truncated program headers".into());
        }
        if u32_at(o) == 3 {
            return Err("dynamically linked (it has an interpreter); build it with -static".into());
        }
    }
    Ok(())
}

fn is_static_binary(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| check_static_x86_64(&b).is_ok())
}

/// Find qemu-system-x86_64 and a static busybox, installing `qemu-system-x86` and
/// `busybox-static` with apt when missing and `install` allows (and we are root).
pub fn find_tools(install: bool, progress: &mut dyn FnMut(&str)) -> Result<Tools, String> {
    let find_busybox = || {
        let mut cands: Vec<PathBuf> = find_in_path("busybox").into_iter().collect();
        cands.extend(["/bin/busybox", "/usr/bin/busybox"].map(PathBuf::from));
        cands.into_iter().find(|p| is_static_binary(p))
    };
    let mut missing = Vec::new();
    if find_in_path("qemu-system-x86_64").is_none() {
        missing.push("qemu-system-x86");
    }
    if find_busybox().is_none() {
        missing.push("busybox-static");
    }
    if !missing.is_empty() {
        if !install {
            return Err(format!("missing: apt-get install {}", missing.join(" ")));
        }
        apt_install(&missing, progress)?;
    }
    Ok(Tools {
        qemu: find_in_path("qemu-system-x86_64").ok_or("qemu-system-x86_64 not found")?,
        busybox: find_busybox().ok_or("no statically linked busybox found")?,
    })
}

/// Version sort key: the numbers in a release string ("6.12.117+deb12-amd64" → 6,12,117,12,64).
fn version_key(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A kernel at `image`, with config-<release> beside it if its name is vmlinuz-<release>.
pub fn kernel_at(image: &Path) -> Result<Kernel, String> {
    if !image.is_file() {
        return Err(format!("kernel image {} does not exist", image.display()));
    }
    let name = image.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let release = name.strip_prefix("vmlinuz-").unwrap_or("").to_string();
    let config = (!release.is_empty())
        .then(|| image.with_file_name(format!("config-{release}")))
        .filter(|p| p.is_file());
    Ok(Kernel {
        image: image.to_path_buf(),
        config,
        release,
    })
}

/// The newest 6.12 kernel already extracted in the cache.
fn cached_kernel(dir: &Path) -> Option<Kernel> {
    let mut found: Vec<Kernel> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let boot = e.path().join("boot");
            let img = std::fs::read_dir(&boot)
                .ok()?
                .flatten()
                .find(|f| f.file_name().to_string_lossy().starts_with("vmlinuz-6.12."))?;
            kernel_at(&img.path()).ok()
        })
        .collect();
    found.sort_by_key(|k| version_key(&k.release));
    found.pop()
}

/// The kernel to boot: `explicit`, else `$TIERLAB_KERNEL`, else the newest Debian
/// `linux-image-6.12.*-amd64-unsigned` in the cache, fetched into it with `apt-get download`
/// and `dpkg-deb -x` when the cache has none (only boot/ is kept: everything the runner
/// needs is built in, see [`REQUIRED_CONFIG`]). Checks the config when there is one.
pub fn find_kernel(
    explicit: Option<&Path>,
    progress: &mut dyn FnMut(&str),
) -> Result<Kernel, String> {
    let kernel = if let Some(p) = explicit {
        kernel_at(p)?
    } else if let Some(p) = std::env::var_os("TIERLAB_KERNEL").filter(|p| !p.is_empty()) {
        kernel_at(Path::new(&p))?
    } else {
        let dir = cache_dir().join("kernel");
        match cached_kernel(&dir) {
            Some(k) => k,
            None => {
                download_kernel(&dir, progress)?;
                cached_kernel(&dir)
                    .ok_or("the downloaded kernel package holds no vmlinuz-6.12.*")?
            }
        }
    };
    if let Some(cfg) = &kernel.config {
        check_kernel_config(
            &std::fs::read_to_string(cfg).map_err(|e| format!("{}: {e}", cfg.display()))?,
        )?;
    } else {
        progress(&format!(
            "no config beside {}: not checking its options",
            kernel.image.display()
        ));
    }
    Ok(kernel)
}

/// Every [`REQUIRED_CONFIG`] option is =y.
pub fn check_kernel_config(config: &str) -> Result<(), String> {
    let value = |opt: &str| {
        config
            .lines()
            .find_map(|l| l.strip_prefix(opt).and_then(|r| r.strip_prefix('=')))
            .unwrap_or("n")
    };
    let bad: Vec<String> = REQUIRED_CONFIG
        .iter()
        .filter(|o| value(o) != "y")
        .map(|o| format!("{o}={}", value(o)))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the kernel lacks built-in options the runner needs (modules are not loaded): {}",
            bad.join(", ")
        ))
    }
}

/// The newest linux-image-6.12.N+debX-amd64-unsigned apt knows, updating its lists once if
/// it knows none.
fn newest_kernel_package(progress: &mut dyn FnMut(&str)) -> Result<String, String> {
    let search = || -> Result<Vec<String>, String> {
        let out = run_cmd(Command::new("apt-cache").args([
            "search",
            "--names-only",
            r"^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64-unsigned$",
        ]))?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect())
    };
    let mut pkgs = search()?;
    if pkgs.is_empty() && is_root() {
        progress("apt knows no 6.12 kernel package; running apt-get update");
        run_cmd(Command::new("apt-get").args(["update", "-q"]))?;
        pkgs = search()?;
    }
    pkgs.sort_by_key(|p| version_key(p));
    pkgs.pop()
        .ok_or_else(|| "apt knows no linux-image-6.12.*-amd64-unsigned package".to_string())
}

fn download_kernel(dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<(), String> {
    if find_in_path("apt-get").is_none() || find_in_path("dpkg-deb").is_none() {
        return Err(
            "no kernel cached and no apt-get/dpkg-deb to fetch one; pass a kernel image".into(),
        );
    }
    let pkg = newest_kernel_package(progress)?;
    progress(&format!("fetching {pkg} into {}", dir.display()));
    let staging = dir.join(format!(".fetch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    let result = (|| {
        run_cmd(
            Command::new("apt-get")
                .args(["download", "-q", &pkg])
                .current_dir(&staging),
        )?;
        let deb = std::fs::read_dir(&staging)
            .map_err(|e| e.to_string())?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or("apt-get download left no .deb")?;
        let root = staging.join("root");
        run_cmd(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        let keep = staging.join("keep");
        std::fs::create_dir_all(&keep).map_err(|e| e.to_string())?;
        std::fs::rename(root.join("boot"), keep.join("boot"))
            .map_err(|e| format!("package has no boot/: {e}"))?;
        let name = pkg
            .trim_start_matches("linux-image-")
            .trim_end_matches("-unsigned");
        let dest = dir.join(name);
        if std::fs::rename(&keep, &dest).is_err() && !dest.join("boot").is_dir() {
            return Err(format!("could not move the kernel to {}", dest.display()));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result
}

// ---------------------------------------------------------------------------------------
// The initramfs.

/// `'…'`-quoted for the shell.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A sysctl's file: paths under /proc/sys and /sys as given, a dotted name under /proc/sys.
pub fn sysctl_path(key: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("sysctl '{key}': {why}"));
    if key.contains(['\n', '\0']) {
        return bad("contains a newline or NUL");
    }
    if key.starts_with("/proc/sys/") || key.starts_with("/sys/") {
        if key.split('/').any(|c| c == "..") {
            return bad("contains ..");
        }
        Ok(key.to_string())
    } else if !key.is_empty() && !key.contains('/') {
        Ok(format!("/proc/sys/{}", key.replace('.', "/")))
    } else {
        bad("not a path under /proc/sys or /sys, nor a dotted sysctl name")
    }
}

/// Where the program lives in the guest.
const GUEST_DIR: &str = "/tierlab";
/// /init's reader of /proc/zoneinfo's pagesets: a `TIERLAB-PCP` line per node and CPU, with
/// `count` and `high` summed over the node's zones (only pageset lines end their key in ':').
const PCP_AWK: &str = r#"$1 == "Node" { n = $2 + 0 } $1 == "cpu:" { c = $2 }
  $1 == "count:" { count[n " " c] += $2 } $1 == "high:" { high[n " " c] += $2 }
  END { for (k in count) { split(k, a, " "); print "TIERLAB-PCP node=" a[1] " cpu=" a[2] " count=" count[k] " high=" high[k] } }"#;
/// CONFIG_NR_CPUS of Debian's amd64 kernel: a `TIERLAB-PCP` line for a higher CPU is garbage.
const MAX_GUEST_CPUS: usize = 8192;

/// A guest path for an extra file: relative ones under /tierlab, none under mounted-over
/// directories.
fn guest_file_path(p: &str) -> Result<String, String> {
    let abs = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{GUEST_DIR}/{p}")
    };
    for shadowed in ["/tmp", "/proc", "/sys", "/dev"] {
        if abs == shadowed || abs.starts_with(&format!("{shadowed}/")) {
            return Err(format!(
                "file '{p}': {shadowed} is mounted over in the guest"
            ));
        }
    }
    if abs == "/init" {
        return Err("file '/init' would replace the runner's init".into());
    }
    Ok(abs)
}

/// The guest's /init.
pub fn init_script(
    sysctls: &[(String, String)],
    reads: &[String],
    program: &str,
    args: &[String],
    ftrace: Option<&Ftrace>,
    start_delay_us: u32,
) -> String {
    let mut s = String::from(
        r#"#!/bin/sh
# tierlab guest init: mount, report, apply sysctls, run the program, power off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp
tl_up() { cut -d' ' -f1 /proc/uptime; }
echo "TIERLAB-INIT uptime=$(tl_up) release=$(uname -r)"
tl_set() {
  if (printf '%s\n' "$2" > "$1") 2>/tmp/.tl_err; then
    echo "TIERLAB-SYSCTL $1=$2 ok (reads $(head -c 200 "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//'))"
  else
    echo "TIERLAB-SYSCTL $1=$2 failed: $(tr '\n' ' ' < /tmp/.tl_err | sed 's/ *$//')"
  fi
}
"#,
    );
    for (path, value) in sysctls {
        s += &format!("tl_set {} {}\n", sh_quote(path), sh_quote(value));
    }
    for path in reads {
        let p = sh_quote(path);
        s += &format!(
            "printf 'TIERLAB-READ %s=%s\\n' {p} \"$(head -c 200 {p} 2>/dev/null | tr '\\n' ' ' | sed 's/ *$//')\"\n"
        );
    }
    // Before the nodes' memory is read: the ring buffers come out of each CPU's node, and the
    // stand-in must hold them as the guest does.
    if let Some(f) = ftrace {
        s += &f.setup_script();
    }
    s += r#"for n in /sys/devices/system/node/node[0-9]*; do
  echo "TIERLAB-NODE id=${n##*/node} memtotal_kb=$(awk '/MemTotal/ {print $4}' $n/meminfo) memfree_kb=$(awk '/MemFree/ {print $4}' $n/meminfo) cpus=$(cat $n/cpulist) distance=$(tr -s ' ' ',' < $n/distance)"
done
"#;
    s += &format!("awk '{PCP_AWK}' /proc/zoneinfo\n");
    // The CPU each kswapd last ran on (/proc/PID/stat field 39), where it wakes next if idle.
    s += r#"for p in /proc/[0-9]*; do
  case "$(cat $p/comm 2>/dev/null)" in
    kswapd[0-9]*) echo "TIERLAB-KSWAPD node=$(cut -c7- $p/comm) cpu=$(awk '{print $39}' $p/stat)" ;;
  esac
done
"#;
    s += r#"for t in /sys/devices/virtual/memory_tiering/memory_tier[0-9]*; do
  [ -d "$t" ] && echo "TIERLAB-TIER id=${t##*/memory_tier} nodes=$(cat $t/nodelist)"
done
dmesg | grep -E 'acpi/hmat|memory-tier|memory_tier' | sed 's/^/TIERLAB-DMESG /'
stty -F /dev/ttyS1 raw -echo 2>/dev/null
cd /tierlab
"#;
    if start_delay_us > 0 {
        s += &format!("usleep {start_delay_us}\n");
    }
    s += "echo \"TIERLAB-RUN uptime=$(tl_up)\"\n";
    s += &sh_quote(program);
    for a in args {
        s += " ";
        s += &sh_quote(a);
    }
    s += r#" > /dev/ttyS1
tl_rc=$?
echo "TIERLAB-EXIT code=$tl_rc uptime=$(tl_up)"
"#;
    if ftrace.is_some() {
        s += &Ftrace::dump_script();
    }
    s += r#"echo TIERLAB-END > /dev/ttyS1
poweroff -f
"#;
    s
}

/// The newc initramfs: busybox and its applet links, /init, /dev/console, the program under
/// /tierlab, the extra files.
pub fn build_initramfs(
    tools: &Tools,
    run: &GuestRun,
    sysctls: &[(String, String)],
) -> Result<Vec<u8>, String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let prog_bytes = read(&run.program)?;
    check_static_x86_64(&prog_bytes).map_err(|e| format!("{}: {e}", run.program.display()))?;
    let prog_name = run
        .program
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("{}: no file name", run.program.display()))?;
    let prog_guest = format!("{GUEST_DIR}/{prog_name}");

    let mut c = Cpio::new();
    for d in [
        "bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "root", "etc", "tierlab",
    ] {
        c.dir(d, 0o755)?;
    }
    c.char_dev("dev/console", 0o600, 5, 1)?;
    c.file("bin/busybox", 0o755, &read(&tools.busybox)?)?;
    let applets = run_cmd(Command::new(&tools.busybox).arg("--list-full"))?;
    for a in applets.lines().map(str::trim).filter(|a| !a.is_empty()) {
        if a != "bin/busybox" && !c.contains(a) {
            c.symlink(a, "/bin/busybox")?;
        }
    }
    if !c.contains("bin/sh") {
        c.symlink("bin/sh", "/bin/busybox")?;
    }
    c.file(
        "init",
        0o755,
        init_script(
            sysctls,
            &run.reads,
            &prog_guest,
            &run.args,
            run.ftrace.as_ref(),
            run.start_delay_us,
        )
        .as_bytes(),
    )?;
    c.file(&prog_guest, 0o755, &prog_bytes)?;
    for (guest, host) in &run.files {
        let g = guest_file_path(guest)?;
        let mode = std::fs::metadata(host)
            .map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o777
            })
            .unwrap_or(0o644);
        c.file(&g, mode, &read(host)?)?;
    }
    Ok(c.finish())
}

// ---------------------------------------------------------------------------------------
// Running.

static RUN_SEQ: AtomicU32 = AtomicU32::new(0);

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The last `n` lines of `s`.
fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Boot the machine, run the program, return its stdout and what the guest reported.
/// Installs QEMU and busybox and fetches the kernel if missing (see [`find_tools`],
/// [`find_kernel`]). Fails if QEMU fails, the guest does not reach the program's end in
/// `run.timeout` (QEMU is killed then), or the program's output came back incomplete; a
/// program that exits non-zero is not a failure here (see `exit_code`).
pub fn run(
    machine: &GuestMachine,
    run: &GuestRun,
    progress: &mut dyn FnMut(&str),
) -> Result<GuestOutput, String> {
    machine.check()?;
    let tools = find_tools(true, progress)?;
    let kernel = find_kernel(run.kernel.as_deref(), progress)?;
    run_with(machine, run, &tools, &kernel, progress)
}

/// [`run`] with the tools and kernel already found.
pub fn run_with(
    machine: &GuestMachine,
    run: &GuestRun,
    tools: &Tools,
    kernel: &Kernel,
    progress: &mut dyn FnMut(&str),
) -> Result<GuestOutput, String> {
    machine.check()?;
    if machine.accel == Accel::Kvm {
        Accel::kvm_usable().map_err(|e| format!("cannot run the guest under KVM: {e}; use TCG"))?;
    }
    let sysctls: Vec<(String, String)> = run
        .sysctls
        .iter()
        .map(|(k, v)| {
            if v.contains(['\n', '\0']) {
                return Err(format!("sysctl '{k}': value contains a newline or NUL"));
            }
            Ok((sysctl_path(k)?, v.clone()))
        })
        .collect::<Result<_, String>>()?;
    progress("building the initramfs");
    for r in &run.reads {
        if sysctl_path(r)? != *r {
            return Err(format!("read '{r}': not a path under /proc/sys or /sys"));
        }
    }
    let initrd = build_initramfs(tools, run, &sysctls)?;

    let dir = std::env::temp_dir().join(format!(
        "tierlab-guest-{}-{}",
        std::process::id(),
        RUN_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let scratch = Scratch(dir);
    let initrd_path = scratch.0.join("initrd.cpio");
    let stdout_path = scratch.0.join("stdout.txt");
    std::fs::write(&initrd_path, &initrd).map_err(|e| format!("{}: {e}", initrd_path.display()))?;

    let mut append = vec!["console=ttyS0", "quiet", "panic=-1", "nokaslr"];
    append.extend(run.cmdline.iter().map(String::as_str));
    let args = machine.qemu_args(&kernel.image, &initrd_path, &append.join(" "), &stdout_path);

    progress(&format!(
        "booting {} ({} CPUs, {} nodes, {} MiB, {:?})",
        if kernel.release.is_empty() {
            kernel.image.display().to_string()
        } else {
            kernel.release.clone()
        },
        machine.cpus,
        machine.nodes.len(),
        machine.total_mib(),
        machine.accel
    ));
    let start = Instant::now();
    let mut child = Command::new(&tools.qemu)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", tools.qemu.display()))?;
    let (tx, rx) = mpsc::channel::<String>();
    let mut stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut line = Vec::new();
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                if b == b'\n' {
                    let _ = tx.send(
                        String::from_utf8_lossy(&line)
                            .trim_end_matches('\r')
                            .to_string(),
                    );
                    line.clear();
                } else {
                    line.push(b);
                }
            }
        }
        if !line.is_empty() {
            let _ = tx.send(
                String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string(),
            );
        }
    });
    let mut stderr_pipe = child.stderr.take().ok_or("no stderr pipe")?;
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr_pipe.read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    });

    let deadline = start + run.timeout;
    let mut console = String::new();
    let mut init_wall = None;
    let mut timed_out = false;
    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        match rx.recv_timeout((deadline - now).min(Duration::from_secs(1))) {
            Ok(line) => {
                if let Some(m) = marker(&line) {
                    if m.starts_with("TIERLAB-INIT") && init_wall.is_none() {
                        let t = start.elapsed().as_secs_f64();
                        init_wall = Some(t);
                        progress(&format!("/init reached after {t:.1} s"));
                    } else if m.starts_with("TIERLAB-RUN") {
                        progress("running the program");
                    } else if m.starts_with("TIERLAB-EXIT") {
                        progress(&format!(
                            "program finished: {}",
                            m.trim_start_matches("TIERLAB-EXIT ")
                        ));
                    }
                }
                console.push_str(&line);
                console.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Stdout is closed (QEMU is exiting) or time is up: reap it, killing it if need be.
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if !timed_out && Instant::now() < deadline + Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let wall_seconds = start.elapsed().as_secs_f64();
    let _ = reader.join();
    while let Ok(line) = rx.try_recv() {
        console.push_str(&line);
        console.push('\n');
    }
    let stderr = err_reader.join().unwrap_or_default();
    let fail = |why: String, console: &str| {
        Err(format!(
            "{why}\nqemu: {} {}\nqemu stderr: {}\nconsole (last 40 lines):\n{}",
            tools.qemu.display(),
            args.join(" "),
            tail(stderr.trim(), 10),
            tail(console, 40)
        ))
    };
    if timed_out {
        return fail(
            format!(
                "the guest did not finish within {:?}; QEMU was killed",
                run.timeout
            ),
            &console,
        );
    }
    let Some(status) = status else {
        return fail(
            "QEMU did not exit after closing its console; it was killed".into(),
            &console,
        );
    };

    let mut out = GuestOutput {
        stdout_lines: Vec::new(),
        trace_lines: Vec::new(),
        ftrace_errors: Vec::new(),
        console,
        wall_seconds,
        init_wall_seconds: init_wall.unwrap_or(f64::NAN),
        boot_seconds: f64::NAN,
        program_seconds: f64::NAN,
        exit_code: -1,
        kernel_release: String::new(),
        sysctls: Vec::new(),
        nodes: Vec::new(),
        reads: Vec::new(),
    };
    let finished = parse_console(&mut out, &sysctls);
    if !finished {
        return fail(
            format!("the guest stopped before the program finished (QEMU exited {status})"),
            &out.console,
        );
    }
    let raw = std::fs::read(&stdout_path).map_err(|e| format!("the program's stdout: {e}"))?;
    let text = String::from_utf8_lossy(&raw).replace('\r', "");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.last().map(String::as_str) != Some("TIERLAB-END") {
        return fail(
            "the program's stdout came back without its end marker (truncated)".into(),
            &out.console,
        );
    }
    lines.pop();
    let (trace, program): (Vec<String>, Vec<String>) = lines
        .into_iter()
        .partition(|l| l.starts_with(ftrace::LINE_PREFIX));
    out.trace_lines = trace
        .into_iter()
        .map(|l| l[ftrace::LINE_PREFIX.len()..].to_string())
        .collect();
    out.stdout_lines = program;
    Ok(out)
}

/// The `TIERLAB-…` marker in a console line (a kernel message may precede it on the line).
fn marker(line: &str) -> Option<&str> {
    line.find("TIERLAB-").map(|i| &line[i..])
}

/// `key=value` fields after a marker word.
fn fields(m: &str) -> Vec<(&str, &str)> {
    m.split_whitespace()
        .skip(1)
        .filter_map(|f| f.split_once('='))
        .collect()
}

/// The bracketed choice of a sysfs choice file's contents ("always [madvise] never" →
/// "madvise"); None for a plain value.
fn selected(reads: &str) -> Option<&str> {
    let (_, after) = reads.split_once('[')?;
    after.split_once(']').map(|(s, _)| s)
}

/// Fill `out` from /init's report on the console; whether the program's exit was reported.
fn parse_console(out: &mut GuestOutput, sysctls: &[(String, String)]) -> bool {
    let mut finished = false;
    let mut run_uptime = f64::NAN;
    let mut pending: Vec<&(String, String)> = sysctls.iter().collect();
    let console = out.console.clone();
    for line in console.lines() {
        let Some(m) = marker(line) else { continue };
        let word = m.split_whitespace().next().unwrap_or("");
        let get = |k: &str| {
            fields(m)
                .into_iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        };
        let num = |k: &str| {
            get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        match word {
            "TIERLAB-FTRACE" => out
                .ftrace_errors
                .push(m["TIERLAB-FTRACE ".len().min(m.len())..].to_string()),
            "TIERLAB-INIT" => {
                out.boot_seconds = num("uptime");
                out.kernel_release = get("release").unwrap_or_default();
            }
            "TIERLAB-SYSCTL" => {
                let rest = &m["TIERLAB-SYSCTL ".len().min(m.len())..];
                let Some(pos) = pending
                    .iter()
                    .position(|(p, v)| rest.starts_with(&format!("{p}={v} ")))
                else {
                    continue;
                };
                let (p, v) = pending.remove(pos);
                let verdict = &rest[p.len() + 1 + v.len() + 1..];
                let (ok, detail) = if let Some(d) = verdict.strip_prefix("ok") {
                    (
                        true,
                        d.trim()
                            .trim_start_matches("(reads")
                            .trim_end_matches(')')
                            .trim(),
                    )
                } else {
                    (false, verdict.trim_start_matches("failed:").trim())
                };
                // A choice file reads back its options with the chosen one in brackets
                // (mm/huge_memory.c enabled_show, defrag_show: "always [madvise] never");
                // any other selection means the write did not take.
                let ok = ok && selected(detail).is_none_or(|s| s == v.as_str());
                out.sysctls.push(SysctlResult {
                    path: p.clone(),
                    value: v.clone(),
                    ok,
                    detail: detail.to_string(),
                });
            }
            "TIERLAB-READ" => {
                let rest = &m["TIERLAB-READ ".len().min(m.len())..];
                if let Some((p, v)) = rest.split_once('=') {
                    out.reads.push((p.to_string(), v.trim().to_string()));
                }
            }
            "TIERLAB-NODE" => {
                let Some(id) = get("id").and_then(|v| v.parse().ok()) else {
                    continue;
                };
                out.nodes.push(GuestNodeInfo {
                    id,
                    memtotal_kib: get("memtotal_kb").and_then(|v| v.parse().ok()).unwrap_or(0),
                    memfree_kib: get("memfree_kb").and_then(|v| v.parse().ok()).unwrap_or(0),
                    pcp_count: Vec::new(),
                    pcp_high: Vec::new(),
                    kswapd_cpu: None,
                    cpus: get("cpus").unwrap_or_default(),
                    distance: get("distance")
                        .unwrap_or_default()
                        .split(',')
                        .filter_map(|d| d.parse().ok())
                        .collect(),
                    tier: None,
                });
            }
            "TIERLAB-PCP" => {
                let field = |k| get(k).and_then(|v| v.parse::<u64>().ok());
                let (Some(id), Some(cpu)) = (field("node"), field("cpu")) else {
                    continue;
                };
                let Some(n) = out.nodes.iter_mut().find(|n| n.id as u64 == id) else {
                    continue;
                };
                let cpu = cpu as usize;
                if cpu >= MAX_GUEST_CPUS {
                    continue;
                }
                for (list, v) in [(&mut n.pcp_count, "count"), (&mut n.pcp_high, "high")] {
                    if list.len() <= cpu {
                        list.resize(cpu + 1, 0);
                    }
                    list[cpu] = field(v).unwrap_or(0);
                }
            }
            "TIERLAB-KSWAPD" => {
                let field = |k| get(k).and_then(|v| v.parse::<u32>().ok());
                if let (Some(id), Some(cpu)) = (field("node"), field("cpu")) {
                    if let Some(n) = out.nodes.iter_mut().find(|n| n.id == id) {
                        n.kswapd_cpu = Some(cpu);
                    }
                }
            }
            "TIERLAB-TIER" => {
                let Some(id) = get("id").and_then(|v| v.parse::<u32>().ok()) else {
                    continue;
                };
                let members = parse_cpu_list(&get("nodes").unwrap_or_default()).unwrap_or_default();
                for n in out.nodes.iter_mut().filter(|n| members.contains(&n.id)) {
                    n.tier = Some(id);
                }
            }
            "TIERLAB-RUN" => run_uptime = num("uptime"),
            "TIERLAB-EXIT" => {
                finished = true;
                out.exit_code = get("code").and_then(|v| v.parse().ok()).unwrap_or(-1);
                out.program_seconds = num("uptime") - run_uptime;
            }
            _ => {}
        }
    }
    out.nodes.sort_by_key(|n| n.id);
    // A sysctl whose line never came (e.g. mangled by a kernel message) counts as failed.
    for (p, v) in pending {
        out.sysctls.push(SysctlResult {
            path: p.clone(),
            value: v.clone(),
            ok: false,
            detail: "no report from the guest".into(),
        });
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 CPU + 256 MiB DRAM, and a CPU-less 256 MiB CXL-like node (migrc-qemu's figures).
    const TWO_NODE: &str = r#"
[machine]
cpus = 1
[[machine.nodes]]
capacity_mib = 256
read_latency_ns = 106
write_latency_ns = 106
read_bandwidth_gbps = 270
write_bandwidth_gbps = 272
cpus = "0"
[[machine.nodes]]
capacity_mib = 256
read_latency_ns = 192
write_latency_ns = 192
read_bandwidth_gbps = 83.2
write_bandwidth_gbps = 84.3
cpus = ""
[workload]
type = "xsbench"
"#;

    fn two_node_config() -> Config {
        Config::from_str_with(TWO_NODE, "two-node", None, &[]).expect("two-node config")
    }

    fn numa_args(args: &[String]) -> Vec<String> {
        args.windows(2)
            .filter(|w| w[0] == "-numa" || w[0] == "-object")
            .map(|w| w[1].clone())
            .collect()
    }

    #[test]
    fn machine_from_config() {
        let m = GuestMachine::from_config(&two_node_config(), Accel::Tcg).unwrap();
        assert_eq!(m.cpus, 1);
        assert_eq!(m.nodes.len(), 2);
        assert_eq!(m.nodes[0].cpus, vec![0]);
        assert!(m.nodes[1].cpus.is_empty());
        assert_eq!(m.nodes[1].read_bandwidth_gbps, 83.2);
        assert_eq!(m.total_mib(), 512);
        assert_eq!(m.initiators(), vec![0]);
    }

    #[test]
    fn qemu_args_for_two_nodes() {
        let m = GuestMachine::from_config(&two_node_config(), Accel::Tcg).unwrap();
        let args = m.qemu_args(
            Path::new("/k"),
            Path::new("/i"),
            "console=ttyS0",
            Path::new("/o"),
        );
        let joined = args.join(" ");
        assert!(joined
            .starts_with("-machine q35,hmat=on -accel tcg -icount shift=0,sleep=off -cpu max"));
        assert!(joined.contains("-smp 1 -m 512M"));
        assert!(joined.contains("-kernel /k -initrd /i -append console=ttyS0"));
        assert!(joined.contains("-serial stdio -serial file:/o -no-reboot"));
        assert_eq!(
            numa_args(&args),
            [
                "memory-backend-ram,id=m0,size=256M",
                "node,nodeid=0,memdev=m0,cpus=0",
                "memory-backend-ram,id=m1,size=256M",
                "node,nodeid=1,memdev=m1,initiator=0",
                "dist,src=0,dst=1,val=20",
                "dist,src=1,dst=0,val=20",
                "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=read-latency,latency=106",
                "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=write-latency,latency=106",
                "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=read-bandwidth,bandwidth=270000M",
                "hmat-lb,initiator=0,target=0,hierarchy=memory,data-type=write-bandwidth,bandwidth=272000M",
                "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=read-latency,latency=192",
                "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=write-latency,latency=192",
                "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=read-bandwidth,bandwidth=83200M",
                "hmat-lb,initiator=0,target=1,hierarchy=memory,data-type=write-bandwidth,bandwidth=84304M",
            ]
        );
        let kvm = GuestMachine {
            accel: Accel::Kvm,
            ..m
        };
        let joined = kvm
            .qemu_args(Path::new("/k"), Path::new("/i"), "", Path::new("/o"))
            .join(" ");
        assert!(joined.contains("-accel kvm -cpu host") && !joined.contains("icount"));
    }

    /// The tiers the kernel should compute agree with tierlab's own memory_tiers.
    #[test]
    fn expected_tiers_match_tierlab() {
        let cfg = two_node_config();
        let m = GuestMachine::from_config(&cfg, Accel::Tcg).unwrap();
        let ours = m.expected_tiers();
        let tl = tierlab::mm::memory_tiers::MemoryTiers::new(&cfg);
        let theirs: Vec<u32> = tl.tier_start.iter().map(|t| (t >> 7) as u32).collect();
        assert_eq!(ours, theirs);
        assert_eq!(ours[0], 4);
        assert!(ours[1] > 4, "{ours:?}");
        // An explicit adistance comes out as that tier.
        let cfg = Config::from_str_with(
            TWO_NODE,
            "two-node",
            None,
            &["machine.nodes.1.adistance=1200".into()],
        )
        .unwrap();
        let m = GuestMachine::from_config(&cfg, Accel::Tcg).unwrap();
        assert_eq!(m.expected_tiers(), vec![4, 1200 >> 7]);
    }

    #[test]
    fn cpu_lists_distances_and_bandwidth_quantizing() {
        let node = |cpus: Vec<u32>, lat: f64, bw: f64| GuestNode {
            mib: 64,
            cpus,
            read_latency_ns: lat,
            write_latency_ns: lat,
            read_bandwidth_gbps: bw,
            write_bandwidth_gbps: bw,
        };
        let m = GuestMachine {
            cpus: 6,
            nodes: vec![
                node(vec![0, 1, 2, 4], 100.0, 300.0),
                node(vec![3, 5], 100.0, 300.0),
                node(vec![], 250.0, 0.5),
            ],
            distance: vec![vec![10, 21, 17], vec![21, 10, 28], vec![17, 28, 10]],
            accel: Accel::Tcg,
        };
        m.check().unwrap();
        let args = m.qemu_args(Path::new("/k"), Path::new("/i"), "", Path::new("/o"));
        let numa = numa_args(&args);
        assert!(numa.contains(&"node,nodeid=0,memdev=m0,cpus=0-2,cpus=4".to_string()));
        assert!(numa.contains(&"node,nodeid=1,memdev=m1,cpus=3,cpus=5".to_string()));
        assert!(numa.contains(&"node,nodeid=2,memdev=m2,initiator=0".to_string()));
        assert!(numa.contains(&"dist,src=1,dst=2,val=28".to_string()));
        let h = m.hmat();
        assert_eq!(h.len(), 6);
        // Node 2 from node 1 is 28/17 as far as from node 0.
        let e12 = h
            .iter()
            .find(|e| e.initiator == 1 && e.target == 2)
            .unwrap();
        assert_eq!(e12.read_latency_ns, (250.0f64 * 28.0 / 17.0).round() as u64);
        // 300 GB/s and 0.5 GB/s in one table: a common base keeps every entry in 16 bits.
        for e in &h {
            assert_eq!(e.read_bandwidth_mbps % 8, 0);
            assert!(e.read_bandwidth_mbps / 8 < 65_535);
        }
        // 500 MB/s rounds to 504 (63 × 8) in those tables.
        assert_eq!(
            m.expected_tiers(),
            vec![4, 4, (576 * 500 / 200 * 600000 / 1008) >> 7]
        );
        // CPU nodes whose performance differs by more than 10%: the kernel puts all in tier 4.
        let mut odd = m.clone();
        odd.nodes[1].read_latency_ns = 150.0;
        assert_eq!(odd.expected_tiers(), vec![4, 4, 4]);
        let mut bad = m.clone();
        bad.nodes[1].cpus = vec![0];
        assert!(bad.check().is_err());
    }

    #[test]
    fn sysctl_paths() {
        assert_eq!(
            sysctl_path("kernel.numa_balancing").unwrap(),
            "/proc/sys/kernel/numa_balancing"
        );
        assert_eq!(
            sysctl_path("/sys/kernel/mm/numa/demotion_enabled").unwrap(),
            "/sys/kernel/mm/numa/demotion_enabled"
        );
        assert!(sysctl_path("/etc/passwd").is_err());
        assert!(sysctl_path("/sys/../etc/x").is_err());
        assert!(guest_file_path("data.bin").unwrap() == "/tierlab/data.bin");
        assert!(guest_file_path("/tmp/x").is_err());
    }

    #[test]
    fn init_script_quotes() {
        let s = init_script(
            &[("/proc/sys/vm/x".into(), "it's".into())],
            &["/proc/sys/vm/min_free_kbytes".into()],
            "/tierlab/p",
            &["a b".into(), "c'd".into()],
            None,
            0,
        );
        assert!(s.contains(r"tl_set '/proc/sys/vm/x' 'it'\''s'"));
        assert!(s.contains(r"'/tierlab/p' 'a b' 'c'\''d' > /dev/ttyS1"));
        // Reads come after every write.
        let read = s.find("TIERLAB-READ %s=%s").unwrap();
        assert!(s.find("tl_set '/proc/sys/vm/x'").unwrap() < read);
        assert!(s.contains(r"head -c 200 '/proc/sys/vm/min_free_kbytes'"));
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(!s.contains("usleep"));
        // --start-jitter: /init sleeps just before the program.
        let s = init_script(&[], &[], "/tierlab/p", &[], None, 1333);
        let sleep = s.find("usleep 1333\n").unwrap();
        assert!(sleep < s.find("'/tierlab/p' > /dev/ttyS1").unwrap());
        assert!(s.find("TIERLAB-NODE").unwrap() < sleep);
    }

    #[test]
    fn init_reads_each_cpus_lists_summed_over_the_nodes_zones() {
        let Some(busybox) = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            eprintln!("skipped: no busybox to run /init's awk with");
            return;
        };
        // /proc/zoneinfo as 6.12 prints it (zoneinfo_show_print), cut to the lines that matter.
        let zoneinfo = "\
Node 0, zone      DMA
  pages free     3808
        min      17
        high     25
  pagesets
    cpu: 0
              count: 0
              high:  0
              batch: 1
    cpu: 1
              count: 2
              high:  7
              batch: 1
Node 0, zone    DMA32
  pages free     44632
        high     339
  pagesets
    cpu: 0
              count: 774
              high:  1071
              batch: 15
    cpu: 1
              count: 450
              high:  1348
              batch: 15
Node 1, zone    DMA32
  pagesets
    cpu: 0
              count: 949
              high:  3234
              batch: 31
    cpu: 1
              count: 114
              high:  2641
              batch: 31
";
        let file = std::env::temp_dir().join(format!("tierlab-zoneinfo-{}", std::process::id()));
        std::fs::write(&file, zoneinfo).unwrap();
        let out = std::process::Command::new(busybox)
            .args(["awk", PCP_AWK])
            .arg(&file)
            .output()
            .unwrap();
        std::fs::remove_file(&file).ok();
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        assert_eq!(
            lines,
            [
                "TIERLAB-PCP node=0 cpu=0 count=774 high=1071",
                "TIERLAB-PCP node=0 cpu=1 count=452 high=1355",
                "TIERLAB-PCP node=1 cpu=0 count=949 high=3234",
                "TIERLAB-PCP node=1 cpu=1 count=114 high=2641",
            ]
        );
    }

    #[test]
    fn parses_the_console_report() {
        let console = "\
[    0.6] something
TIERLAB-INIT uptime=1.93 release=6.12.117+deb12-amd64
TIERLAB-SYSCTL /proc/sys/kernel/numa_balancing=2 ok (reads 2)
TIERLAB-SYSCTL /sys/kernel/mm/transparent_hugepage/enabled=never ok (reads always madvise [never])
TIERLAB-SYSCTL /proc/sys/vm/bogus=1 failed: sh: can't create /proc/sys/vm/bogus: nonexistent directory
TIERLAB-SYSCTL /sys/kernel/mm/transparent_hugepage/defrag=defer+madvise ok (reads always defer [defer+madvise] madvise never)
TIERLAB-SYSCTL /sys/kernel/mm/transparent_hugepage/shmem_enabled=always ok (reads always within_size advise [never] deny force)
TIERLAB-SYSCTL /sys/kernel/mm/lru_gen/enabled=y ok (reads 0x0007)
TIERLAB-READ /proc/sys/vm/min_free_kbytes=22528
TIERLAB-NODE id=1 memtotal_kb=255672 cpus= distance=20,10
TIERLAB-NODE id=0 memtotal_kb=218352 cpus=0 distance=10,20
TIERLAB-PCP node=0 cpu=1 count=40 high=300
TIERLAB-PCP node=0 cpu=0 count=12 high=200
TIERLAB-PCP node=9 cpu=0 count=5 high=5
TIERLAB-KSWAPD node=0 cpu=2
TIERLAB-KSWAPD node=1 cpu=x
TIERLAB-TIER id=26 nodes=1
TIERLAB-TIER id=4 nodes=0
TIERLAB-RUN uptime=2.00
TIERLAB-EXIT code=3 uptime=2.50
";
        let sysctls: Vec<(String, String)> = [
            ("/proc/sys/kernel/numa_balancing", "2"),
            ("/sys/kernel/mm/transparent_hugepage/enabled", "never"),
            ("/proc/sys/vm/bogus", "1"),
            ("/proc/sys/vm/never_reported", "1"),
            (
                "/sys/kernel/mm/transparent_hugepage/defrag",
                "defer+madvise",
            ),
            (
                "/sys/kernel/mm/transparent_hugepage/shmem_enabled",
                "always",
            ),
            ("/sys/kernel/mm/lru_gen/enabled", "y"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let mut out = GuestOutput {
            stdout_lines: vec![],
            trace_lines: vec![],
            ftrace_errors: vec![],
            console: console.into(),
            wall_seconds: 0.0,
            init_wall_seconds: 0.0,
            boot_seconds: 0.0,
            program_seconds: 0.0,
            exit_code: 0,
            kernel_release: String::new(),
            sysctls: vec![],
            nodes: vec![],
            reads: vec![],
        };
        assert!(parse_console(&mut out, &sysctls));
        assert_eq!(out.boot_seconds, 1.93);
        assert_eq!(out.kernel_release, "6.12.117+deb12-amd64");
        assert_eq!(out.exit_code, 3);
        assert!((out.program_seconds - 0.5).abs() < 1e-9);
        assert_eq!(out.tiers(), vec![Some(4), Some(26)]);
        assert_eq!(out.nodes[1].distance, vec![20, 10]);
        assert_eq!(out.nodes[0].memtotal_kib, 218352);
        assert_eq!(out.nodes[1].cpus, "");
        assert_eq!(out.nodes[0].pcp_count, vec![12, 40]);
        assert_eq!(out.nodes[0].pcp_high, vec![200, 300]);
        assert!(out.nodes[1].pcp_count.is_empty());
        assert_eq!(out.nodes[0].kswapd_cpu, Some(2));
        assert_eq!(out.nodes[1].kswapd_cpu, None);
        assert!(out.sysctls[0].ok && out.sysctls[0].detail == "2");
        assert_eq!(out.sysctls[1].detail, "always madvise [never]");
        assert!(!out.sysctls[2].ok && out.sysctls[2].detail.contains("nonexistent"));
        // Reported in console order; the one never reported comes last.
        let by_path = |p: &str| out.sysctls.iter().find(|s| s.path.ends_with(p)).unwrap();
        assert!(!by_path("never_reported").ok);
        // A bracketed choice must be the value written; a plain readback is not compared.
        let defrag = by_path("transparent_hugepage/defrag");
        assert!(defrag.ok && defrag.detail == "always defer [defer+madvise] madvise never");
        assert!(!by_path("shmem_enabled").ok);
        assert!(by_path("lru_gen/enabled").ok);
        assert_eq!(out.failed_sysctls().len(), 3);
        assert_eq!(out.read("/proc/sys/vm/min_free_kbytes"), Some("22528"));
        assert_eq!(out.read("/proc/sys/vm/other"), None);
        assert_eq!(selected("always [madvise] never"), Some("madvise"));
        assert_eq!(selected("0x0007"), None);
    }

    #[test]
    fn elf_checks() {
        assert!(check_static_x86_64(b"#!/bin/sh\n").is_err());
        if let Ok(me) = std::fs::read("/proc/self/exe") {
            // The test binary is dynamically linked (glibc's default) or static; either way
            // the check must say something definite about an x86-64 ELF.
            let r = check_static_x86_64(&me);
            assert!(r.is_ok() || r.unwrap_err().contains("dynamically linked"));
        }
    }

    #[test]
    fn kernel_config_check() {
        let good: String = REQUIRED_CONFIG.iter().map(|o| format!("{o}=y\n")).collect();
        assert!(check_kernel_config(&good).is_ok());
        let bad = good.replace("CONFIG_ACPI_HMAT=y", "CONFIG_ACPI_HMAT=m");
        let e = check_kernel_config(&bad).unwrap_err();
        assert!(e.contains("CONFIG_ACPI_HMAT=m"), "{e}");
        assert_eq!(
            version_key("6.12.117+deb12-amd64"),
            vec![6, 12, 117, 12, 64]
        );
        assert!(
            version_key("linux-image-6.12.117+deb12") > version_key("linux-image-6.12.43+deb12")
        );
    }

    // -----------------------------------------------------------------------------------
    // Booting for real.

    const PROBE_C: &str = r#"
#include <dirent.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    int nodes = 0;
    DIR *d = opendir("/sys/devices/system/node");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9')
            nodes++;
    printf("tierlab-guest-probe hello %s\n", argc > 1 ? argv[1] : "");
    printf("nodes=%d\n", nodes);
    /* A second argument N: N more lines of 64 bytes, to measure the output channel. */
    for (long i = 0, n = argc > 2 ? atol(argv[2]) : 0; i < n; i++)
        printf("line %08ld ......................................................\n", i);
    return 0;
}
"#;

    /// Compile the probe with `cc -static`, or say why not.
    fn build_probe(dir: &Path) -> Result<PathBuf, String> {
        let src = dir.join("probe.c");
        let bin = dir.join("probe");
        std::fs::write(&src, PROBE_C).map_err(|e| e.to_string())?;
        run_cmd(
            Command::new("cc")
                .args(["-static", "-O2", "-o"])
                .arg(&bin)
                .arg(&src),
        )?;
        Ok(bin)
    }

    /// Boot the two-node machine with `accel` and check what came back; Err(reason) means
    /// the environment cannot do it (the caller skips), a panic means it booted wrong.
    fn smoke(accel: Accel) -> Result<GuestOutput, String> {
        let mut log = |m: &str| eprintln!("[guest] {m}");
        let tools = find_tools(true, &mut log)?;
        let kernel = find_kernel(None, &mut log)?;
        let dir =
            std::env::temp_dir().join(format!("tierlab-probe-{}-{:?}", std::process::id(), accel));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let _scratch = Scratch(dir.clone());
        let probe =
            build_probe(&dir).map_err(|e| format!("cannot build a static C program: {e}"))?;
        let cfg = two_node_config();
        let machine = GuestMachine::from_config(&cfg, accel)?;
        let mut run = GuestRun::new(&probe);
        run.args = vec!["world".into()];
        run.timeout = Duration::from_secs(180);
        run.sysctls = [
            ("kernel.numa_balancing", "2"),
            ("/sys/kernel/mm/numa/demotion_enabled", "true"),
            ("/sys/kernel/mm/lru_gen/enabled", "y"),
            ("/proc/sys/vm/watermark_scale_factor", "200"),
            ("/sys/kernel/mm/transparent_hugepage/enabled", "never"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let out = run_with(&machine, &run, &tools, &kernel, &mut log)
            .unwrap_or_else(|e| panic!("the guest run failed: {e}"));
        eprintln!(
            "[guest] {:?}: kernel {}, /init at {:.2} s guest / {:.2} s wall, total {:.2} s wall, tiers {:?}",
            accel,
            out.kernel_release,
            out.boot_seconds,
            out.init_wall_seconds,
            out.wall_seconds,
            out.tiers()
        );
        for l in out.console.lines().filter(|l| l.contains("TIERLAB-")) {
            eprintln!("[guest]   {l}");
        }
        assert_eq!(out.exit_code, 0, "console:\n{}", out.console);
        assert_eq!(
            out.stdout_lines,
            ["tierlab-guest-probe hello world", "nodes=2"]
        );
        assert!(
            out.failed_sysctls().is_empty(),
            "{:?}",
            out.failed_sysctls()
        );
        assert_eq!(out.sysctls.len(), 5);
        assert!(
            out.kernel_release.starts_with("6.12."),
            "{}",
            out.kernel_release
        );
        assert_eq!(out.nodes.len(), 2, "console:\n{}", out.console);
        let tiers = out.tiers();
        let (Some(t0), Some(t1)) = (tiers[0], tiers[1]) else {
            panic!(
                "a node has no memory tier: {tiers:?}\nconsole:\n{}",
                out.console
            );
        };
        assert!(
            t1 > t0,
            "node 1 is not in a lower tier than node 0: {tiers:?}"
        );
        let expected: Vec<Option<u32>> = machine.expected_tiers().into_iter().map(Some).collect();
        assert_eq!(
            tiers, expected,
            "the guest's tiers differ from the ones the HMAT should give"
        );
        // 256 MiB nodes: MemTotal is what is left after the kernel's own reservations.
        assert!(out
            .nodes
            .iter()
            .all(|n| n.memtotal_kib > 100 * 1024 && n.memtotal_kib <= 256 * 1024));
        Ok(out)
    }

    /// Boots Linux 6.12 under QEMU (TCG with icount: deterministic, ≈10 s wall here). Skips,
    /// passing, when QEMU, busybox, the kernel or a static C compiler cannot be had.
    #[test]
    fn guest_smoke_two_nodes() {
        if let Err(why) = smoke(Accel::Tcg) {
            eprintln!("skipped guest_smoke_two_nodes: {why}");
        }
    }

    /// The same under KVM, where /dev/kvm can boot a stock kernel (not on hosts whose KVM is
    /// a paravirtualized nested one). `cargo test -p tierlab-cli guest_smoke_kvm -- --ignored`.
    #[test]
    #[ignore]
    fn guest_smoke_kvm() {
        if let Err(why) = Accel::kvm_usable() {
            eprintln!("skipped guest_smoke_kvm: {why}");
            return;
        }
        if let Err(why) = smoke(Accel::Kvm) {
            eprintln!("skipped guest_smoke_kvm: {why}");
        }
    }
    /// Boot a scenario's whole machine (`$TIERLAB_GUEST_SCENARIO`, default
    /// scenarios/cxl-1to4.toml: 16 CPUs, 2 + 8 GiB) with the probe, under TCG or, with
    /// `TIERLAB_GUEST_ACCEL=kvm`, KVM, and print the timings and tiers. For measuring:
    /// `cargo test -p tierlab-cli guest_boot_scenario -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn guest_boot_scenario() {
        let path = std::env::var("TIERLAB_GUEST_SCENARIO").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/cxl-1to4.toml").to_string()
        });
        let accel = match std::env::var("TIERLAB_GUEST_ACCEL").as_deref() {
            Ok("kvm") => Accel::Kvm,
            _ => Accel::Tcg,
        };
        let cfg = Config::load(Path::new(&path), &[]).expect("scenario");
        let machine = GuestMachine::from_config(&cfg, accel).unwrap();
        let dir =
            std::env::temp_dir().join(format!("tierlab-probe-{}-scenario", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let _scratch = Scratch(dir.clone());
        let probe = build_probe(&dir).unwrap();
        let mut run = GuestRun::new(&probe);
        run.timeout = Duration::from_secs(900);
        let lines: usize = std::env::var("TIERLAB_GUEST_LINES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        run.args = vec!["scenario".into(), lines.to_string()];
        let mut log = |m: &str| eprintln!("[guest] {m}");
        let out = super::run(&machine, &run, &mut log).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "[guest] {path}: {accel:?}, {} CPUs, {} MiB: /init at {:.2} s guest / {:.2} s wall, \
             total {:.2} s wall; tiers {:?}, expected {:?}; MemTotal {:?} KiB",
            machine.cpus,
            machine.total_mib(),
            out.boot_seconds,
            out.init_wall_seconds,
            out.wall_seconds,
            out.tiers(),
            machine.expected_tiers(),
            out.nodes.iter().map(|n| n.memtotal_kib).collect::<Vec<_>>()
        );
        assert_eq!(out.stdout_lines.len(), 2 + lines);
        assert_eq!(out.stdout_lines[1], "nodes=2");
        eprintln!(
            "[guest] program: {} lines in {:.2} s guest time",
            out.stdout_lines.len(),
            out.program_seconds
        );
    }
    /// TCG with icount (and no RDRAND/RDSEED, whose values come from the host) replays the
    /// same boot: two runs give the same console, kernel timestamps included.
    /// `cargo test -p tierlab-cli guest_tcg_is_deterministic -- --ignored`.
    #[test]
    #[ignore]
    fn guest_tcg_is_deterministic() {
        let a = smoke(Accel::Tcg).expect("first run");
        let b = smoke(Accel::Tcg).expect("second run");
        assert!(a.console.contains("acpi/hmat"));
        assert_eq!(a.console, b.console);
        assert_eq!(a.stdout_lines, b.stdout_lines);
    }
}
