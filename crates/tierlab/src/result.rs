//! The result of a run, typed: what `tierlab run --json` writes, what the summary prints and
//! what `compare` tabulates all come from a `RunResult`, collected once at the end of a run.
//! Counters keep the kernel's names (`/proc/vmstat`, perf events, `/proc/interrupts`).

use crate::check::Violation;
use crate::mm::mmzone::{LRU_NAMES, NR_LRU_LISTS};
use crate::sim::{Sim, TIMELINE_VM};
use crate::stats::PerfCounters;
use crate::stats::{Vm, PERF_NAMES, VM_NAMES};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// Named counters in the kernel's order, serialized as a JSON object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterMap(pub Vec<(String, u64)>);

impl CounterMap {
    fn named(names: &[&str], values: &[u64]) -> CounterMap {
        CounterMap(
            names
                .iter()
                .zip(values)
                .map(|(n, v)| (n.to_string(), *v))
                .collect(),
        )
    }

    /// The counter of that name (0 when absent, as /proc/vmstat omits nothing it knows).
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// A vmstat event counter by its enum.
    pub fn vm(&self, v: Vm) -> u64 {
        self.get(v.name())
    }
}

impl Serialize for CounterMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        OrderedMap(&self.0).serialize(s)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub sys_s: f64,
    /// User and system time in CPU cycles, the unit of the per-function cycle counters.
    pub cycles: u64,
}

/// The `TLB` and `CAL` rows of /proc/interrupts, per CPU.
#[derive(Clone, Debug, Serialize)]
pub struct Interrupts {
    #[serde(rename = "TLB")]
    pub tlb: Vec<u64>,
    #[serde(rename = "CAL")]
    pub cal: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LruSizes {
    pub inactive_anon: u64,
    pub active_anon: u64,
    pub inactive_file: u64,
    pub active_file: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct WatermarkResult {
    pub min: u64,
    pub low: u64,
    pub high: u64,
    pub promo: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PcpResult {
    pub count: u32,
    pub high: u32,
    pub batch: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PagesetResult {
    pub batch: u32,
    pub high_min: u32,
    pub high_max: u32,
    pub per_cpu: Vec<PcpResult>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ZoneLockResult {
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_cycles: u64,
    pub hold_cycles: u64,
    /// Wait cycles as a share of all CPUs' cycles.
    pub contention_percent: f64,
    /// Frees that drained a per-CPU list for high-order freeing (seed 002's free_high).
    pub free_high: u64,
    /// Pages taken from buddy rather than a per-CPU list (seed 002's alloc_zone).
    pub alloc_zone: u64,
}

/// One NUMA node at the end of the run.
#[derive(Clone, Debug, Serialize)]
pub struct NodeResult {
    pub node: usize,
    pub name: String,
    /// memory_tier id.
    pub tier: u64,
    pub cpus: Vec<u32>,
    pub capacity_pages: u64,
    /// Free pages, per-CPU lists included.
    pub free: u64,
    pub nr_free_pages: u64,
    pub pcp_pages: u64,
    /// Pages on the per-CPU lists, averaged over the timeline's samples (seed 002: "the
    /// average used memory … increases … because more pages are cached in PCP").
    pub pcp_pages_mean: f64,
    pub anon: u64,
    pub file: u64,
    /// PMD-mapped anon THPs on the node (NR_ANON_THPS / HPAGE_PMD_NR; meminfo's
    /// AnonHugePages is this × 2048 kB).
    pub anon_thps: u64,
    pub lru: LruSizes,
    pub watermarks: WatermarkResult,
    pub pageset: PagesetResult,
    pub zone_lock: ZoneLockResult,
    pub kswapd_failures: u32,
    pub toptier: bool,
    pub demotion_targets: Vec<u8>,
    /// Memory accesses this node served.
    pub accesses: u64,
    pub pgpromote_success: u64,
    pub pgpromote_candidate: u64,
    /// Pages demoted from this node.
    pub pgdemote: u64,
    pub hot_threshold_ms: u64,
}

/// The workload's own report; its work counter is named by the workload (`lookups`, ...).
#[derive(Clone, Debug)]
pub struct WorkloadResult {
    pub name: String,
    pub work_unit: String,
    pub work: u64,
    pub per_second: f64,
    pub runtime_s: f64,
    pub threads: usize,
    pub info: Vec<(String, String)>,
}

impl Serialize for WorkloadResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry(&self.work_unit, &self.work)?;
        m.serialize_entry(&format!("{}_per_second", self.work_unit), &self.per_second)?;
        m.serialize_entry("runtime_s", &self.runtime_s)?;
        m.serialize_entry("threads", &self.threads)?;
        m.serialize_entry("info", &OrderedMap(&self.info))?;
        m.end()
    }
}

/// Key-value pairs serialized as a JSON object, in order.
struct OrderedMap<'a, V>(&'a [(String, V)]);

impl<V: Serialize> Serialize for OrderedMap<'_, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct NodeSample {
    pub free: u64,
    pub anon: u64,
    pub file: u64,
    pub accesses: u64,
    /// Pages on the per-CPU lists.
    pub pcp: u64,
    /// PMD-mapped anon THPs (nr_anon_transparent_hugepages of the node).
    pub anon_thps: u64,
}

/// One timeline point: cumulative counters at `t_ms` of simulated time.
#[derive(Clone, Debug)]
pub struct TimelinePoint {
    pub t_ms: f64,
    pub work: u64,
    /// The TIMELINE_VM counters.
    pub vm: CounterMap,
    pub tlb_shootdowns: u64,
    /// The `TLB` row of /proc/interrupts so far, per CPU.
    pub tlb_per_cpu: Vec<u64>,
    pub dtlb_load_misses: u64,
    pub nodes: Vec<NodeSample>,
    /// Per watched region: resident pages per node (absent when the workload names none).
    pub regions: Option<Vec<(String, Vec<u64>)>>,
    /// Every thread's run time so far (se.sum_exec_runtime, as /proc/PID/task/TID/schedstat
    /// reports it), ms.
    pub run_time_ms: Vec<f64>,
    /// Every thread's accesses so far.
    pub accesses: Vec<u64>,
}

impl Serialize for TimelinePoint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("t_ms", &self.t_ms)?;
        m.serialize_entry("work", &self.work)?;
        for (k, v) in &self.vm.0 {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("tlb_shootdowns", &self.tlb_shootdowns)?;
        m.serialize_entry("tlb_per_cpu", &self.tlb_per_cpu)?;
        m.serialize_entry("dTLB-load-misses", &self.dtlb_load_misses)?;
        m.serialize_entry("nodes", &self.nodes)?;
        if let Some(regions) = &self.regions {
            m.serialize_entry("regions", &OrderedMap(regions))?;
        }
        m.serialize_entry("run_time_ms", &self.run_time_ms)?;
        m.serialize_entry("accesses", &self.accesses)?;
        m.end()
    }
}

/// A scripted workload's phase: simulated time and the counters it moved.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    pub name: String,
    pub instances: u64,
    pub duration_us: f64,
    pub duration_us_per_instance: f64,
    pub start_ms: Option<f64>,
    pub accesses: u64,
    /// Summed run time of the phase's threads (sum_exec_runtime: pacing waits excluded).
    pub run_time_us: f64,
    /// Non-zero vmstat deltas.
    pub vmstat: CounterMap,
}

/// One swap area as /proc/swaps shows it, plus the RAM zram's pool holds.
#[derive(Clone, Debug, Serialize)]
pub struct SwapAreaResult {
    pub kind: String,
    pub priority: i32,
    pub size_kib: u64,
    pub used_kib: u64,
    /// zram's mem_used_total: frames holding the compressed pages.
    pub pool_kib: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    pub level: String,
    pub ran: bool,
    pub checks_run: u64,
    /// Of those, checks of every invariant (the rest check the TLBs only).
    pub full_checks: u64,
    pub violations: u64,
    /// The first violations found (at most 100).
    pub details: Vec<Violation>,
}

/// Everything a run reports. Only `wall_seconds` and `accesses_per_wall_second` vary
/// between two runs of the same config and seed.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub seed: u64,
    pub machine: String,
    /// Whether every thread exited, or `sim.max_seconds` or an interrupt cut the run short.
    pub ended: crate::sim::Ended,
    pub sim_seconds: f64,
    /// The workload's timed region (the whole run when it marks none).
    pub runtime_s: f64,
    pub wall_seconds: f64,
    pub accesses: u64,
    pub accesses_per_wall_second: f64,
    pub cpu_time: CpuTime,
    pub perf: CounterMap,
    pub perf_per_cpu: Vec<CounterMap>,
    pub vmstat: CounterMap,
    pub interrupts: Interrupts,
    pub nodes: Vec<NodeResult>,
    pub workload: WorkloadResult,
    pub timeline: Vec<TimelinePoint>,
    pub phases: Vec<PhaseResult>,
    /// Anon pages MADV_PAGEOUT left resident for want of a free swap slot.
    pub pageout_kept_no_swap: u64,
    /// Every swap area at the end of the run (/proc/swaps); empty without swap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub swap: Vec<SwapAreaResult>,
    pub check: CheckResult,
    /// Bytes of simulator state per simulated frame.
    pub frame_bytes: usize,
    /// The NUMA scanner's events (`sim.trace_numa_scan`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub numa_scan_trace: Vec<crate::mm::numa_scan_trace::NumaScanEvent>,
}

impl RunResult {
    /// Collect the result of a finished (or stopped) run.
    pub fn collect(sim: &Sim, wall_seconds: f64) -> RunResult {
        let (k, hw) = (&sim.k, &sim.hw);
        let wm = sim.workload_metrics();
        let accesses = sim.accesses();
        let sys: u64 = hw.cpus.iter().map(|c| c.sys_cycles).sum();
        let user: u64 = hw.cpus.iter().map(|c| c.user_cycles).sum();
        let check = &k.checker;
        RunResult {
            scenario: k.cfg.scenario.name.clone(),
            seed: k.cfg.scenario.seed,
            machine: k.cfg.machine.name.clone(),
            ended: sim.ended,
            sim_seconds: hw.cycles_to_s(hw.end_cycles()),
            runtime_s: wm.roi_seconds,
            wall_seconds,
            accesses,
            accesses_per_wall_second: if wall_seconds > 0.0 {
                accesses as f64 / wall_seconds
            } else {
                0.0
            },
            cpu_time: CpuTime {
                user_s: hw.cycles_to_s(user),
                sys_s: hw.cycles_to_s(sys),
                cycles: user + sys,
            },
            perf: CounterMap::named(&PERF_NAMES, &sim.perf_total().v),
            perf_per_cpu: hw
                .cpus
                .iter()
                .map(|c| CounterMap::named(&PERF_NAMES, &c.perf.v))
                .collect(),
            vmstat: vmstat(sim),
            interrupts: Interrupts {
                tlb: hw.cpus.iter().map(|c| c.irq.tlb).collect(),
                cal: hw.cpus.iter().map(|c| c.irq.cal).collect(),
            },
            nodes: nodes(sim),
            workload: WorkloadResult {
                name: sim.workload_name.clone(),
                work_unit: sim.work_unit.clone(),
                work: wm.work,
                per_second: wm.per_second,
                runtime_s: wm.roi_seconds,
                threads: k.sched.threads.len(),
                info: sim.workload_info.clone(),
            },
            timeline: timeline(sim),
            phases: phases(sim),
            pageout_kept_no_swap: k.pageout_kept_no_swap,
            swap: k
                .swap
                .devices
                .iter()
                .map(|d| SwapAreaResult {
                    kind: if d.sync_io { "zram" } else { "block" }.into(),
                    priority: d.prio,
                    size_kib: d.pages() * 4,
                    used_kib: d.inuse_pages() * 4,
                    pool_kib: d.pool.len() as u64 * 4,
                })
                .collect(),
            check: CheckResult {
                level: format!("{:?}", check.level).to_lowercase(),
                ran: check.checks_run > 0,
                checks_run: check.checks_run,
                full_checks: check.full_checks,
                violations: check.count,
                details: check.violations.clone(),
            },
            frame_bytes: std::mem::size_of::<crate::mm::page::Page>(),
            numa_scan_trace: k.numa_scan_trace.clone().unwrap_or_default(),
            // A run only ends with live threads when max_seconds stopped it.
        }
    }

    /// The result as a JSON value (what `--json` writes).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a run result serializes")
    }
}

/// /proc/vmstat: the event counters, then the node items summed over nodes.
fn vmstat(sim: &Sim) -> CounterMap {
    let k = &sim.k;
    let mut m = CounterMap::named(&VM_NAMES, &k.vm.v);
    let mut item = |name: &str, v: u64| m.0.push((name.to_string(), v));
    item(
        "nr_free_pages",
        k.nodes.iter().map(|n| n.zone.nr_free).sum(),
    );
    for (i, name) in LRU_NAMES.iter().enumerate().take(NR_LRU_LISTS) {
        item(name, k.nodes.iter().map(|n| n.lru_size(i)).sum());
    }
    item("nr_isolated", k.nodes.iter().map(|n| n.nr_isolated).sum());
    item("nr_anon_pages", k.mms.iter().map(|mm| mm.rss_anon).sum());
    item(
        "nr_anon_transparent_hugepages",
        (0..k.nodes.len()).map(|n| k.anon_thps_on(n)).sum(),
    );
    item(
        "nr_mapped",
        k.mms.iter().map(|mm| mm.rss_file + mm.rss_shmem).sum(),
    );
    item("nr_file_pages", k.files.iter().map(|f| f.nr_cached).sum());
    m
}

fn nodes(sim: &Sim) -> Vec<NodeResult> {
    let (k, hw) = (&sim.k, &sim.hw);
    let total = hw.end_cycles().max(1);
    k.nodes
        .iter()
        .enumerate()
        .map(|(n, node)| {
            let z = &node.zone;
            let first = z.pcp.first();
            NodeResult {
                node: n,
                name: k.cfg.machine.nodes[n].name.clone(),
                tier: k.tiers.tier_id(n),
                cpus: node.cpus.clone(),
                capacity_pages: z.managed_pages,
                free: z.nr_free + z.pcp_pages(),
                nr_free_pages: z.nr_free,
                pcp_pages: z.pcp_pages(),
                pcp_pages_mean: mean_pcp(sim, n),
                anon: node.nr_anon,
                file: node.nr_file,
                anon_thps: k.anon_thps_on(n),
                lru: LruSizes {
                    inactive_anon: node.lru_size(0),
                    active_anon: node.lru_size(1),
                    inactive_file: node.lru_size(2),
                    active_file: node.lru_size(3),
                },
                watermarks: WatermarkResult {
                    min: z.wmark.min,
                    low: z.wmark.low,
                    high: z.wmark.high,
                    promo: z.wmark.promo,
                },
                pageset: PagesetResult {
                    batch: first.map_or(0, |p| p.batch),
                    high_min: first.map_or(0, |p| p.high_min),
                    high_max: first.map_or(0, |p| p.high_max),
                    per_cpu: z
                        .pcp
                        .iter()
                        .map(|p| PcpResult {
                            count: p.count,
                            high: p.high,
                            batch: p.batch,
                        })
                        .collect(),
                },
                zone_lock: ZoneLockResult {
                    acquisitions: z.lock.acquisitions,
                    contended: z.lock.contended,
                    wait_cycles: z.lock.wait_cycles,
                    hold_cycles: z.lock.hold_cycles,
                    contention_percent: 100.0 * z.lock.wait_cycles as f64
                        / (total as f64 * hw.cpus.len() as f64),
                    free_high: z.free_high,
                    alloc_zone: z.alloc_zone,
                },
                kswapd_failures: node.kswapd_failures,
                toptier: k.tiers.node_is_toptier(n),
                demotion_targets: k.tiers.preferred[n].clone(),
                accesses: hw.mem[n].accesses,
                pgpromote_success: node.numab.pgpromote_success,
                pgpromote_candidate: node.numab.pgpromote_candidate,
                pgdemote: node.nr_demoted,
                hot_threshold_ms: match node.numab.nbp_threshold {
                    0 => k.cfg.kernel.numa_balancing_hot_threshold_ms,
                    t => t,
                },
            }
        })
        .collect()
}

/// Node `n`'s per-CPU list pages, averaged over the timeline's samples.
fn mean_pcp(sim: &Sim, n: usize) -> f64 {
    let samples = sim.timeline.len().max(1) as f64;
    sim.timeline
        .iter()
        .map(|s| s.nodes[n].4 as f64)
        .sum::<f64>()
        / samples
}

fn timeline(sim: &Sim) -> Vec<TimelinePoint> {
    let names: Vec<&str> = TIMELINE_VM.iter().map(|v| v.name()).collect();
    sim.timeline
        .iter()
        .map(|s| TimelinePoint {
            t_ms: s.t_ms,
            work: s.work,
            vm: CounterMap::named(&names, &s.vm),
            tlb_shootdowns: s.tlb_shootdowns,
            tlb_per_cpu: s.tlb_per_cpu.clone(),
            dtlb_load_misses: s.dtlb_load_misses,
            nodes: s
                .nodes
                .iter()
                .map(|&(free, anon, file, accesses, pcp, anon_thps)| NodeSample {
                    free,
                    anon,
                    file,
                    accesses,
                    pcp,
                    anon_thps,
                })
                .collect(),
            regions: (!sim.regions.is_empty()).then(|| {
                sim.regions
                    .iter()
                    .zip(&s.regions)
                    .map(|(r, per_node)| (r.name.clone(), per_node.clone()))
                    .collect()
            }),
            run_time_ms: s
                .run_time
                .iter()
                .map(|&c| sim.hw.cycles_to_s(c) * 1e3)
                .collect(),
            accesses: s.accesses.clone(),
        })
        .collect()
}

fn phases(sim: &Sim) -> Vec<PhaseResult> {
    let us = |cycles: u64| sim.hw.cycles_to_s(cycles) * 1e6;
    sim.phase_stats
        .iter()
        .map(|p| PhaseResult {
            name: p.name.clone(),
            instances: p.instances,
            duration_us: us(p.cycles),
            duration_us_per_instance: if p.instances > 0 {
                us(p.cycles) / p.instances as f64
            } else {
                0.0
            },
            start_ms: p.first_begin.map(|b| sim.hw.cycles_to_s(b) * 1e3),
            accesses: p.accesses,
            run_time_us: us(p.run_cycles),
            vmstat: CounterMap(
                VM_NAMES
                    .iter()
                    .zip(p.vm_delta.v.iter())
                    .filter(|(_, v)| **v > 0)
                    .map(|(n, v)| (n.to_string(), *v))
                    .collect(),
            ),
        })
        .collect()
}

/// Workload metrics derived from the threads' marks.
pub struct WorkloadMetrics {
    pub work: u64,
    pub roi_seconds: f64,
    pub per_second: f64,
}

impl Sim {
    pub fn perf_total(&self) -> PerfCounters {
        let mut p = PerfCounters::default();
        for c in &self.hw.cpus {
            p.merge(&c.perf);
        }
        p
    }

    pub fn accesses(&self) -> u64 {
        self.k.sched.threads.iter().map(|t| t.accesses).sum()
    }

    /// XSBench's Runtime: from the first RoiBegin to the last RoiEnd (omp_get_wtime around the
    /// simulation loop); the whole run when the workload marks no region.
    pub fn workload_metrics(&self) -> WorkloadMetrics {
        let work = self.k.sched.threads.iter().map(|t| t.work).sum();
        let begin = self
            .k
            .sched
            .threads
            .iter()
            .filter_map(|t| t.roi_begin)
            .min();
        let end = self.k.sched.threads.iter().filter_map(|t| t.roi_end).max();
        let roi = match (begin, end) {
            (Some(b), Some(e)) if e > b => e - b,
            _ => self.hw.end_cycles(),
        };
        let roi_seconds = self.hw.cycles_to_s(roi);
        WorkloadMetrics {
            work,
            roi_seconds,
            per_second: if roi_seconds > 0.0 {
                work as f64 / roi_seconds
            } else {
                0.0
            },
        }
    }
}
