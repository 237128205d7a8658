//! The simulated machine and its event loop.
//!
//! Each CPU advances its own cycle clock. The engine always runs the busy CPU whose clock is
//! lowest for one quantum, after delivering every timed event (kswapd runs, timeline samples)
//! due by then. Kernel work runs on some CPU and adds its cycles to that CPU's clock.

use crate::check::Checker;
use crate::config::{CheckLevel, Config};
use crate::cost::CostTable;
use crate::machine::cache::LINE_SHIFT;
use crate::machine::cpu::Cpu;
use crate::machine::tlb::{tlb_data, tlb_pfn, TLB_DIRTY, TLB_WRITE};
use crate::mm::filemap::PageCacheFile;
use crate::mm::memory_tiers::MemoryTiers;
use crate::mm::mm_types::Mm;
use crate::mm::mmzone::Pgdat;
use crate::mm::page::{FrameTable, NIL};
use crate::mm::page_alloc::{
    calculate_min_free_kbytes, setup_per_zone_wmarks, setup_zone_pagesets, Zone,
};
use crate::mm::pgtable::{pte, PAGE_SHIFT, USER_VA_END};
use crate::mm::rmap::TlbUbc;
use crate::stats::{Perf, VmCounters};
use crate::workload::{Mark, Op, ThreadStream, Workload};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
    IFetch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Runnable,
    AtBarrier,
    Sleeping,
    Exited,
}

pub struct Thread {
    pub id: u32,
    pub mm: u32,
    pub stream: Box<dyn ThreadStream>,
    pub buf: Vec<Op>,
    pub pos: usize,
    pub state: ThreadState,
    pub cpu: u32,
    pub roi_begin: Option<u64>,
    pub roi_end: Option<u64>,
    pub work: u64,
    pub accesses: u64,
    /// se.sum_exec_runtime in cycles.
    pub runtime: u64,
    /// p->node_stamp: runtime at which task_tick_numa next considers queueing scan work.
    pub numa_node_stamp: u64,
    /// p->numa_scan_period in ms (init_numa_balancing sets scan_delay).
    pub numa_scan_period_ms: u64,
    /// Next slot of `Op::Pace` rate control (0: not started).
    pub pace_next: u64,
    /// Phase the thread is in (Mark::Phase).
    pub phase: Option<u32>,
}

/// Timed events, ordered by (time, sequence number) for determinism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// kswapd of a node runs one balance_pgdat pass.
    KswapdRun(u8),
    /// Take a timeline sample (and a periodic invariant check).
    Sample,
    /// A sleeping thread wakes up.
    Wake(u32),
}

/// A run that cannot continue: what a real machine would report (SIGSEGV, OOM).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError(pub String);

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

/// One timeline point: cumulative counters at `t_ms` of simulated time.
#[derive(Clone, Debug)]
pub struct Sample {
    pub t_ms: f64,
    /// Per node: (free pages incl. pcp, anon pages, file pages, accesses served so far).
    pub nodes: Vec<(u64, u64, u64, u64)>,
    pub work: u64,
    /// The TIMELINE_VM counters, cumulative.
    pub vm: Vec<u64>,
    pub tlb_shootdowns: u64,
    pub dtlb_load_misses: u64,
    /// Per workload region: resident pages per node.
    pub regions: Vec<Vec<u64>>,
}

/// vmstat counters recorded in every timeline sample.
pub const TIMELINE_VM: [crate::stats::Vm; 9] = {
    use crate::stats::Vm::*;
    [
        PgFault,
        PgScanKswapd,
        PgStealKswapd,
        PgDemoteKswapd,
        PgPromoteSuccess,
        NumaHintFaults,
        NumaPteUpdates,
        PgMigrateSuccess,
        AllocStallNormal,
    ]
};

pub struct Sim {
    pub cfg: Config,
    pub cost: CostTable,
    pub cycles_per_ns: f64,
    pub cpus: Vec<Cpu>,
    pub nodes: Vec<Pgdat>,
    /// First pfn past each node's frames (node_of_pfn).
    pub node_end_pfn: Vec<u32>,
    pub frames: FrameTable,
    pub mms: Vec<Mm>,
    pub files: Vec<PageCacheFile>,
    pub threads: Vec<Thread>,
    pub vm: VmCounters,
    pub events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    event_seq: u64,
    pub checker: Checker,
    pub timeline: Vec<Sample>,
    pub rng: ChaCha8Rng,
    /// The reclaim context's pending batched flush (current->tlb_ubc).
    pub tlb_ubc: TlbUbc,
    pub workload_name: String,
    pub work_unit: String,
    pub workload_info: Vec<(String, String)>,
    pub quantum: u64,
    pub max_cycles: u64,
    pub sample_interval: u64,
    /// Threads waiting at a barrier, per process.
    pub barrier_waiting: Vec<Vec<u32>>,
    pub fatal: Option<SimError>,
    pub live_threads: u32,
    /// Time of the latest event or quantum start: "now" for kernel work outside a CPU.
    pub now: u64,
    /// The shared zero page (my_zero_pfn) that read faults on untouched anon memory map.
    pub zero_pfn: u32,
    pub tiers: MemoryTiers,
    /// MIGRC's deferred-flush state (kernel.migrc).
    pub migrc: crate::mm::migrc::Migrc,
    /// Anon pages MADV_PAGEOUT could not reclaim for want of a swap device.
    pub pageout_kept_no_swap: u64,
    pub phase_stats: Vec<crate::phases::PhaseStat>,
    pub regions: Vec<crate::workload::RegionSpec>,
}

impl Sim {
    /// Build the machine, boot the kernel's memory manager and place the workload's threads.
    pub fn new(cfg: Config, workload: Workload) -> Result<Sim, SimError> {
        let m = &cfg.machine;
        let node_cpus = cfg.node_cpus();
        let node_pages: Vec<u64> = m.nodes.iter().map(|n| n.capacity_mib * 256).collect();
        let mut frames = FrameTable::new(&node_pages);
        let ncpus = m.cpus as usize;
        let cycles_per_ns = m.cpu_ghz;

        let mut cpu_node = vec![0u8; ncpus];
        for (n, cpus) in node_cpus.iter().enumerate() {
            for &c in cpus {
                cpu_node[c as usize] = n as u8;
            }
        }
        let cpus: Vec<Cpu> = (0..ncpus)
            .map(|c| Cpu::new(c as u32, cpu_node[c], &m.tlb, m.cache_kib, m.cache_ways))
            .collect();

        let mut zones = Vec::new();
        let mut start = 0u32;
        let mut node_end_pfn = Vec::new();
        for (n, &pages) in node_pages.iter().enumerate() {
            zones.push(Zone::new(n as u8, start, pages, ncpus, &mut frames));
            start += pages as u32;
            node_end_pfn.push(start);
        }
        let total: u64 = node_pages.iter().sum();
        let min_free_kbytes = if cfg.vm.min_free_kbytes > 0 {
            cfg.vm.min_free_kbytes
        } else {
            calculate_min_free_kbytes(total)
        };
        setup_per_zone_wmarks(&mut zones, min_free_kbytes, cfg.vm.watermark_scale_factor);
        let cpus_on_node: Vec<u32> = node_cpus.iter().map(|c| c.len() as u32).collect();
        setup_zone_pagesets(
            &mut zones,
            &cpus_on_node,
            m.cpus,
            cfg.vm.percpu_pagelist_high_fraction,
        );

        // The zero page is reserved at boot, outside every LRU.
        let zero_pfn = {
            let cost = CostTable::default();
            let (pfn, _) = zones[0].alloc_pages_buddy(&mut frames, 0, 0, &cost);
            let pfn = pfn.expect("node 0 has a free page at boot");
            frames.get_mut(pfn).flags = crate::mm::page::pg::USED;
            pfn
        };
        let nnodes = m.nodes.len();
        let mut nodes = Vec::new();
        for (n, zone) in zones.into_iter().enumerate() {
            // build_zonelists: nodes by increasing distance, ties by node id.
            let mut order: Vec<u8> = (0..nnodes as u8).collect();
            order.sort_by_key(|&o| (cfg.distance(n, o as usize), o));
            let nc = &m.nodes[n];
            let lat = |ns: f64| ((ns * cycles_per_ns) / m.mlp).round().max(1.0) as u32;
            nodes.push(Pgdat {
                node_id: n as u8,
                zone,
                lru: Default::default(),
                cpus: node_cpus[n].clone(),
                zonelist: order,
                latency_cycles: [lat(nc.read_latency_ns), lat(nc.write_latency_ns)],
                kswapd_awake: false,
                kswapd_failures: 0,
                nr_isolated: 0,
                nr_anon: 0,
                nr_file: 0,
                kswapd_slept_at: 0,
                numab: Default::default(),
                accesses: 0,
                kswapd_pass: Default::default(),
                demote_wmark: 0,
            });
        }

        let nproc = workload.processes.max(1);
        let mms = (0..nproc).map(Mm::new).collect();
        let files = workload
            .files
            .iter()
            .map(|f| PageCacheFile::new(&f.name, f.pages))
            .collect();
        let check_level = cfg.sim.check_level();
        let quantum = ((cfg.sim.quantum_ns * cycles_per_ns) as u64).max(1);
        let max_cycles = (cfg.sim.max_seconds * 1e9 * cycles_per_ns) as u64;
        let sample_interval = ((cfg.sim.timeline_interval_ms * 1e6 * cycles_per_ns) as u64).max(1);
        let seed = cfg.scenario.seed;
        let mut sim = Sim {
            cost: cfg.cost.clone(),
            cycles_per_ns,
            cpus,
            nodes,
            node_end_pfn,
            frames,
            mms,
            files,
            threads: Vec::new(),
            vm: VmCounters::default(),
            events: BinaryHeap::new(),
            event_seq: 0,
            checker: Checker::new(check_level),
            timeline: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            tlb_ubc: TlbUbc::default(),
            workload_name: workload.name,
            work_unit: workload.work_unit,
            workload_info: workload.info,
            quantum,
            max_cycles,
            sample_interval,
            barrier_waiting: vec![Vec::new(); nproc as usize],
            fatal: None,
            live_threads: 0,
            now: 0,
            zero_pfn,
            tiers: MemoryTiers::new(&cfg),
            migrc: Default::default(),
            pageout_kept_no_swap: 0,
            phase_stats: workload
                .phases
                .iter()
                .map(|n| crate::phases::PhaseStat::named(n))
                .collect(),
            regions: workload.regions.clone(),
            cfg,
        };
        sim.setup_demote_wmarks();
        for (i, spec) in workload.threads.into_iter().enumerate() {
            if spec.process >= nproc {
                return Err(SimError(format!(
                    "workload thread {i} names process {} but the workload has {nproc}",
                    spec.process
                )));
            }
            sim.threads.push(Thread {
                id: i as u32,
                mm: spec.process,
                stream: spec.stream,
                buf: Vec::with_capacity(2048),
                pos: 0,
                state: ThreadState::Runnable,
                cpu: NIL,
                roi_begin: None,
                roi_end: None,
                work: 0,
                accesses: 0,
                runtime: 0,
                numa_node_stamp: 0,
                numa_scan_period_ms: sim.cfg.kernel.numa_balancing_scan_delay_ms,
                pace_next: 0,
                phase: None,
            });
            if let crate::workload::Placement::Pinned(c) = spec.placement {
                if c >= sim.cfg.machine.cpus {
                    return Err(SimError(format!(
                        "workload thread {i} is pinned to CPU {c}, but the machine has {}",
                        sim.cfg.machine.cpus
                    )));
                }
            }
            sim.place_thread(i as u32, spec.placement);
        }
        sim.live_threads = sim.threads.len() as u32;
        sim.schedule(sample_interval, Event::Sample);
        Ok(sim)
    }

    pub fn schedule(&mut self, at: u64, ev: Event) {
        self.event_seq += 1;
        self.events.push(Reverse((at, self.event_seq, ev)));
    }

    /// Charge kernel cycles to a CPU.
    #[inline]
    pub fn charge_sys(&mut self, cpu: usize, cycles: u64) {
        let c = &mut self.cpus[cpu];
        c.clock += cycles;
        c.sys_cycles += cycles;
    }

    #[inline]
    pub fn node_of_pfn(&self, pfn: u32) -> usize {
        let mut n = 0;
        while pfn >= self.node_end_pfn[n] {
            n += 1;
        }
        n
    }

    pub fn ns_to_cycles(&self, ns: f64) -> u64 {
        (ns * self.cycles_per_ns) as u64
    }

    pub fn cycles_to_s(&self, cycles: u64) -> f64 {
        cycles as f64 / (self.cycles_per_ns * 1e9)
    }

    /// The busy CPU that is furthest behind.
    fn next_cpu(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, c) in self.cpus.iter().enumerate() {
            if c.current != NIL && best.is_none_or(|b| c.clock < self.cpus[b].clock) {
                best = Some(i);
            }
        }
        best
    }

    /// Run until every thread has exited (or `sim.max_seconds`), calling `progress` with the
    /// fraction done now and then.
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), SimError> {
        let mut last_report = 0u64;
        loop {
            if self.live_threads == 0 {
                break;
            }
            let (cpu, now) = match self.next_cpu() {
                Some(c) => (Some(c), self.cpus[c].clock),
                None => match self.events.peek() {
                    Some(Reverse((t, _, _))) => (None, *t),
                    None => {
                        return Err(SimError(format!(
                            "deadlock: {} threads are waiting and none can run",
                            self.live_threads
                        )))
                    }
                },
            };
            if self.max_cycles > 0 && now >= self.max_cycles {
                break;
            }
            self.now = now;
            while let Some(Reverse((t, _, ev))) = self.events.peek().copied() {
                if t > now {
                    break;
                }
                self.events.pop();
                self.now = t;
                self.handle_event(ev, t);
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            if let Some(c) = cpu {
                if self.cpus[c].current != NIL {
                    self.run_quantum(c, now + self.quantum);
                }
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            if now >= last_report + self.sample_interval {
                last_report = now;
                progress(self.progress_fraction(now));
            }
        }
        self.finish();
        progress(1.0);
        Ok(())
    }

    fn progress_fraction(&self, now: u64) -> f64 {
        if self.max_cycles > 0 {
            return now as f64 / self.max_cycles as f64;
        }
        let exited = self
            .threads
            .iter()
            .filter(|t| t.state == ThreadState::Exited)
            .count();
        exited as f64 / self.threads.len().max(1) as f64
    }

    fn handle_event(&mut self, ev: Event, t: u64) {
        match ev {
            Event::Sample => {
                self.take_sample(t);
                if self.checker.level != CheckLevel::Off {
                    self.check_invariants("periodic");
                }
                self.schedule(t + self.sample_interval, Event::Sample);
            }
            Event::KswapdRun(node) => self.kswapd_run(node as usize, t),
            Event::Wake(tid) => self.thread_wake(tid as usize, t),
        }
    }

    /// End of run: final sample and invariant check.
    fn finish(&mut self) {
        let end = self.end_cycles();
        self.take_sample(end);
        if self.checker.level != CheckLevel::Off {
            self.check_invariants("end of run");
        }
    }

    /// Simulated time at the end: the latest CPU clock.
    pub fn end_cycles(&self) -> u64 {
        self.cpus.iter().map(|c| c.clock).max().unwrap_or(0)
    }

    fn take_sample(&mut self, t: u64) {
        let nodes = self
            .nodes
            .iter()
            .map(|n| {
                (
                    n.zone.nr_free + n.zone.pcp_pages(),
                    n.nr_anon,
                    n.nr_file,
                    n.accesses,
                )
            })
            .collect();
        let (mut tlb, mut dtlb) = (0, 0);
        for c in &self.cpus {
            tlb += c.irq.tlb;
            dtlb += c.perf.get(Perf::DtlbLoadMisses);
        }
        let regions = self
            .regions
            .iter()
            .map(|r| {
                let mut per_node = vec![0u64; self.nodes.len()];
                let mm = r.process as usize;
                let s = (r.start >> PAGE_SHIFT) as u32;
                let e = ((r.start + r.len) >> PAGE_SHIFT) as u32;
                if mm < self.mms.len() {
                    for vpn in s..e {
                        let p = self.mms[mm].pgtable.get(vpn);
                        if pte::maps_frame(p) && pte::pfn(p) != self.zero_pfn {
                            per_node[self.node_of_pfn(pte::pfn(p))] += 1;
                        }
                    }
                }
                per_node
            })
            .collect();
        self.timeline.push(Sample {
            t_ms: self.cycles_to_s(t) * 1e3,
            nodes,
            work: self.threads.iter().map(|t| t.work).sum(),
            vm: TIMELINE_VM.iter().map(|&v| self.vm.get(v)).collect(),
            tlb_shootdowns: tlb,
            dtlb_load_misses: dtlb,
            regions,
        });
    }

    /// Run the current thread of `c` until its clock reaches `until` or it blocks or exits.
    fn run_quantum(&mut self, c: usize, until: u64) {
        let tid = self.cpus[c].current as usize;
        let mut buf = std::mem::take(&mut self.threads[tid].buf);
        let mut pos = self.threads[tid].pos;
        let mut accesses = 0u64;
        let start_clock = self.cpus[c].clock;
        let start_sys = self.cpus[c].sys_cycles;
        let mut stop = false;
        while self.cpus[c].clock < until && !stop {
            if pos == buf.len() {
                buf.clear();
                pos = 0;
                self.threads[tid].stream.refill(&mut buf);
                if buf.is_empty() {
                    buf.push(Op::Exit);
                }
            }
            let op = buf[pos];
            pos += 1;
            match op {
                Op::Load(a) => {
                    accesses += 1;
                    let cyc = self.access(c, tid, a, AccessKind::Load);
                    self.cpus[c].clock += cyc;
                }
                Op::Store(a) => {
                    accesses += 1;
                    let cyc = self.access(c, tid, a, AccessKind::Store);
                    self.cpus[c].clock += cyc;
                }
                Op::IFetch(a) => {
                    accesses += 1;
                    let cyc = self.access(c, tid, a, AccessKind::IFetch);
                    self.cpus[c].clock += cyc;
                }
                Op::Compute(n) => self.cpus[c].clock += n as u64,
                Op::Mark(m) => {
                    let now = self.cpus[c].clock;
                    let t = &mut self.threads[tid];
                    match m {
                        Mark::RoiBegin => t.roi_begin = Some(now),
                        Mark::RoiEnd => t.roi_end = Some(now),
                        Mark::Work(n) => t.work += n as u64,
                        Mark::Phase(id) => {
                            let in_flight = accesses;
                            self.enter_phase(tid, Some(id), now, in_flight);
                        }
                    }
                }
                Op::Pace(ns) => {
                    let interval = self.ns_to_cycles(ns as f64).max(1);
                    let t = &mut self.threads[tid];
                    let cpu = &mut self.cpus[c];
                    if t.pace_next == 0 {
                        t.pace_next = cpu.clock;
                    }
                    if cpu.clock < t.pace_next {
                        // Idle until the slot: not user time (finish_quantum subtracts it).
                        cpu.idle_cycles += t.pace_next - cpu.clock;
                        cpu.clock = t.pace_next;
                    }
                    t.pace_next += interval;
                }
                Op::Sleep(ns) => {
                    self.threads[tid].pos = pos;
                    self.threads[tid].buf = std::mem::take(&mut buf);
                    self.finish_quantum(c, start_clock, start_sys, accesses, tid);
                    self.thread_sleep(c, tid, ns);
                    return;
                }
                Op::Madvise { addr, len, advice } => {
                    if let Err(e) = self.sys_madvise(c, tid, addr, len, advice) {
                        self.fatal = Some(e);
                    }
                }
                Op::Mmap {
                    addr,
                    len,
                    prot,
                    backing,
                } => {
                    if let Err(e) = self.sys_mmap(c, tid, addr, len, prot, backing) {
                        self.fatal = Some(e);
                    }
                }
                Op::Munmap { addr, len } => {
                    if let Err(e) = self.sys_munmap(c, tid, addr, len) {
                        self.fatal = Some(e);
                    }
                }
                Op::Mprotect { addr, len, prot } => {
                    if let Err(e) = self.sys_mprotect(c, tid, addr, len, prot) {
                        self.fatal = Some(e);
                    }
                }
                Op::MovePages { addr, len, node } => {
                    if let Err(e) = self.sys_move_pages(c, tid, addr, len, node) {
                        self.fatal = Some(e);
                    }
                }
                Op::Barrier => {
                    self.threads[tid].pos = pos;
                    self.threads[tid].buf = std::mem::take(&mut buf);
                    self.finish_quantum(c, start_clock, start_sys, accesses, tid);
                    let now = self.cpus[c].clock;
                    self.enter_phase(tid, None, now, 0);
                    self.thread_barrier(c, tid);
                    return;
                }
                Op::Exit => {
                    self.threads[tid].pos = pos;
                    self.threads[tid].buf = std::mem::take(&mut buf);
                    self.finish_quantum(c, start_clock, start_sys, accesses, tid);
                    let now = self.cpus[c].clock;
                    self.enter_phase(tid, None, now, 0);
                    self.thread_exit(c, tid);
                    return;
                }
            }
            if self.fatal.is_some() {
                stop = true;
            }
        }
        self.threads[tid].pos = pos;
        self.threads[tid].buf = buf;
        self.finish_quantum(c, start_clock, start_sys, accesses, tid);
        self.task_tick_numa(c, tid);
        self.maybe_preempt(c);
    }

    fn finish_quantum(&mut self, c: usize, start_clock: u64, start_sys: u64, acc: u64, tid: usize) {
        let cpu = &mut self.cpus[c];
        let sys = cpu.sys_cycles - start_sys;
        let idle = std::mem::take(&mut cpu.idle_cycles);
        cpu.user_cycles += (cpu.clock - start_clock).saturating_sub(sys + idle);
        self.threads[tid].accesses += acc;
        self.threads[tid].runtime += cpu.clock - start_clock;
    }

    /// One memory access: the TLB hierarchy, then the page walk and fault path on a miss.
    /// Returns the cycles the access costs the thread (kernel time is charged separately).
    #[inline]
    fn access(&mut self, c: usize, tid: usize, vaddr: u64, kind: AccessKind) -> u64 {
        let vpn = (vaddr >> PAGE_SHIFT) as u32;
        let store = kind == AccessKind::Store;
        let cpu = &mut self.cpus[c];
        let asid = cpu.cur_asid;
        let l1 = if kind == AccessKind::IFetch {
            &mut cpu.itlb
        } else {
            &mut cpu.dtlb
        };
        let mut cached = Cached::Miss;
        if vaddr < USER_VA_END {
            if let Some(i) = l1.lookup(vpn, asid) {
                let d = l1.data(i);
                if !store || d & TLB_DIRTY != 0 {
                    return self.mem_cycles(c, tlb_pfn(d), vaddr, store);
                }
                cached = Cached::L1;
            } else if let Some(i) = cpu.stlb.lookup(vpn, asid) {
                let d = cpu.stlb.data(i);
                if !store || d & TLB_DIRTY != 0 {
                    l1.insert(vpn, asid, d);
                    cpu.perf.inc(Perf::StlbHits);
                    return self.cost.stlb_hit_cycles as u64
                        + self.mem_cycles(c, tlb_pfn(d), vaddr, store);
                }
                cached = Cached::Stlb;
            }
        }
        self.access_slow(c, tid, vaddr, vpn, kind, cached)
    }

    /// The data access after translation: a cache-filter hit, or the latency of the frame's
    /// node (which counts the access as memory traffic).
    #[inline(always)]
    fn mem_cycles(&mut self, c: usize, pfn: u32, vaddr: u64, store: bool) -> u64 {
        if let Some(cache) = self.cpus[c].cache.as_mut() {
            let line = ((pfn as u64) << (PAGE_SHIFT - LINE_SHIFT)) | ((vaddr >> LINE_SHIFT) & 63);
            if cache.access(line) {
                return self.cost.cache_hit_cycles as u64;
            }
        }
        let n = self.node_of_pfn(pfn);
        let node = &mut self.nodes[n];
        node.accesses += 1;
        node.latency_cycles[store as usize] as u64
    }

    /// TLB miss (or a store through a clean/read-only entry): walk the page table, set the
    /// A/D bits as the hardware does, fault when the PTE does not allow the access.
    #[cold]
    fn access_slow(
        &mut self,
        c: usize,
        tid: usize,
        vaddr: u64,
        vpn: u32,
        kind: AccessKind,
        mut cached: Cached,
    ) -> u64 {
        let store = kind == AccessKind::Store;
        let mm = self.threads[tid].mm as usize;
        let asid = self.cpus[c].cur_asid;
        let mut cycles = 0u64;
        let mut counted = false;
        loop {
            let p = if vaddr < USER_VA_END {
                self.mms[mm].pgtable.get(vpn)
            } else {
                0
            };
            if pte::present(p) && (!store || p & pte::WRITE != 0) {
                let cpu = &mut self.cpus[c];
                match cached {
                    Cached::Miss if !counted => {
                        cycles += self.cost.page_walk_cycles as u64;
                        count_walk(cpu, kind);
                    }
                    Cached::Stlb => cycles += self.cost.stlb_hit_cycles as u64,
                    _ => {}
                }
                let mut np = p;
                if p & pte::YOUNG == 0 {
                    np |= pte::YOUNG;
                    cycles += self.cost.accessed_bit_cycles as u64;
                    cpu.perf.inc(Perf::AbitAssists);
                }
                if store && p & pte::DIRTY == 0 {
                    np |= pte::DIRTY;
                    cycles += self.cost.dirty_bit_cycles as u64;
                    cpu.perf.inc(Perf::DbitAssists);
                }
                let data = tlb_data(pte::pfn(p), np & pte::WRITE != 0, np & pte::DIRTY != 0);
                let l1 = if kind == AccessKind::IFetch {
                    &mut cpu.itlb
                } else {
                    &mut cpu.dtlb
                };
                // A store through a clean entry updates it in place (the D-bit assist).
                match cached {
                    Cached::L1 => {
                        l1.update(vpn, asid, data);
                        cpu.stlb.update(vpn, asid, data);
                    }
                    Cached::Stlb => {
                        l1.insert(vpn, asid, data);
                        cpu.stlb.update(vpn, asid, data);
                    }
                    Cached::Miss => {
                        l1.insert(vpn, asid, data);
                        cpu.stlb.insert(vpn, asid, data);
                    }
                }
                if np != p {
                    if let Some(slot) = self.mms[mm].pgtable.get_mut(vpn) {
                        *slot = np;
                    }
                }
                debug_assert!(data & TLB_WRITE != 0 || !store);
                return cycles + self.mem_cycles(c, pte::pfn(p), vaddr, store);
            }
            if !counted {
                counted = true;
                cycles += self.cost.page_walk_cycles as u64;
                count_walk(&mut self.cpus[c], kind);
            }
            // A faulting translation is not kept by the hardware.
            self.cpus[c].flush_page(vpn, asid);
            cached = Cached::Miss;
            if let Err(e) = self.handle_mm_fault(c, mm, vaddr, kind) {
                self.fatal = Some(SimError(format!(
                    "thread {tid}: {e} (CPU {c}, address {vaddr:#x})"
                )));
                return cycles;
            }
        }
    }
}

/// Where the fast path found the translation before handing over to the slow path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cached {
    L1,
    Stlb,
    Miss,
}

/// A page walk caused by an STLB miss: perf's dTLB-load/store-misses or iTLB-load-misses
/// (the Intel events count misses that cause a walk).
fn count_walk(cpu: &mut Cpu, kind: AccessKind) {
    cpu.perf.inc(match kind {
        AccessKind::Load => Perf::DtlbLoadMisses,
        AccessKind::Store => Perf::DtlbStoreMisses,
        AccessKind::IFetch => Perf::ItlbLoadMisses,
    });
    cpu.perf.inc(Perf::PageWalks);
}
