//! The engine: the event loop that runs the kernel on the machine.
//!
//! Each CPU advances its own cycle clock. The engine always runs the busy CPU whose clock is
//! lowest for one quantum, after delivering every timed event (kswapd runs, timeline samples,
//! wake-ups) due by then, in (cycle, sequence) order. Kernel work runs on some CPU and adds its
//! cycles to that CPU's clock. Every random choice comes from one generator seeded by
//! `scenario.seed`, so a config and seed give the same result, byte for byte.

use crate::config::{CheckLevel, Config};
use crate::cost::CostTable;
use crate::kernel::{Event, Kernel};
use crate::machine::cache::LINE_SHIFT;
use crate::machine::cpu::Cpu;
use crate::machine::tlb::{tlb_data, tlb_pfn, TLB_DIRTY, TLB_WRITE};
use crate::machine::{node_of, Machine, MemoryNode};
use crate::mm::page::NIL;
use crate::mm::pgtable::{pte, PageTable, HPAGE_PMD_NR, PAGE_SHIFT, USER_VA_END};
use crate::sched::{Thread, ThreadState};
use crate::stats::Perf;
use crate::workload::{Expected, Mark, Op, OpBuf, Slot, Workload};

mod poll_wait;
mod turns;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    Load,
    Store,
    IFetch,
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
    /// Per node: (free pages incl. pcp, anon pages, file pages, accesses served so far, pages
    /// on the per-CPU lists, PMD-mapped anon THPs).
    pub nodes: Vec<(u64, u64, u64, u64, u64, u64)>,
    pub work: u64,
    /// The TIMELINE_VM counters, cumulative.
    pub vm: Vec<u64>,
    pub tlb_shootdowns: u64,
    /// TLB shootdown interrupts per CPU so far (the heatmap in `tierlab report`).
    pub tlb_per_cpu: Vec<u64>,
    pub dtlb_load_misses: u64,
    /// Per workload region: resident pages per node.
    pub regions: Vec<Vec<u64>>,
    /// Every thread's run time so far (se.sum_exec_runtime), cycles.
    pub run_time: Vec<u64>,
    /// Every thread's accesses so far.
    pub accesses: Vec<u64>,
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

/// The engine: the machine, the kernel running on it, and what the run records.
pub struct Sim {
    /// The hardware.
    pub hw: Machine,
    /// The kernel and the workload's tasks.
    pub k: Kernel,
    pub timeline: Vec<Sample>,
    pub workload_name: String,
    pub work_unit: String,
    pub workload_info: Vec<(String, String)>,
    pub quantum: u64,
    pub max_cycles: u64,
    pub sample_interval: u64,
    pub fatal: Option<SimError>,
    /// `machine.vcpu_turns`: kswapd of each node has a step due, to run in its CPU's turn.
    kswapd_due: Vec<bool>,
    /// `machine.vcpu_turns`: the timer the running thread's pacing sleep armed, which ends
    /// its CPU's turn (None while the turn goes on).
    armed: turns::Armed,
    /// `machine.vcpu_turns`: the wake-up time of each CPU's thread that armed its sleep's
    /// timer, kicked, and has yet to reach `schedule()` (0: none).
    pending_wake: Vec<u64>,
    /// `machine.vcpu_turns`: per CPU, the timer of a thread asleep while kswapd runs there.
    asleep_until: Vec<Option<u64>>,
    /// `machine.vcpu_turns`: per CPU, when QEMU's LAPIC timer fires for its next tick (None:
    /// the CPU halted, so its tick is stopped or behind a wake-up timer).
    lapic_tick: Vec<Option<u64>>,
    /// `machine.tick_offset_ns` in cycles: the jiffy boundaries lie this far before
    /// multiples of a tick (turns.rs).
    jiffy_shift: u64,
    /// A jiffy (1 / CONFIG_HZ, the guest kernel's tick rate under vcpu_turns) in cycles: the
    /// scheduler tick's period.
    tick: u64,
    /// Per CPU, where its thread's current stretch of run time began (without
    /// `machine.vcpu_turns`, where a paced sleep idles within a quantum).
    tick_ran_from: Vec<u64>,
    /// Per CPU, a scheduler tick found its thread running: task_tick_numa is due when the
    /// quantum ends (the return to user mode that runs the task work).
    numa_tick: Vec<bool>,
    /// `machine.vcpu_turns`: per CPU, its pending timer interrupt includes its tick.
    tick_irq: Vec<bool>,
    /// `machine.vcpu_turns`: per CPU, a timer interrupt it has yet to take (a minimum-delta or
    /// a wake-up timer), whose handler re-arms the tick.
    lapic_irq: Vec<bool>,
    /// `machine.vcpu_turns`: per CPU, the soft expiry of its sleeping thread's timer (its
    /// slot; the hard expiry is the slot plus the slack), 0 if none: any timer interrupt from
    /// then on runs it (__hrtimer_run_queues compares the soft expiry).
    soft_expiry: Vec<u64>,
    /// `machine.vcpu_turns`: per CPU, halted for less than a tick with its tick kept armed
    /// (cpuidle_idle_call → tick_nohz_idle_retain_tick), the tick first.
    tick_kept: Vec<bool>,
    /// `machine.vcpu_turns`: per CPU, its thread was woken by the handler of a tick taken in
    /// the idle task and has not been switched in yet.
    woke_in_tick: Vec<bool>,
    /// `machine.vcpu_turns`: per CPU, the rest of a timer interrupt's handler a deadline cut,
    /// and whether it interrupted the CPU's work (else it ended a halt).
    handler_left: Vec<Option<(u64, bool)>>,
    /// `machine.vcpu_turns`: each CPU's op that ran past its turn's deadline, if any; its
    /// rest waits for the CPU's next turn.
    overrun: Vec<Option<turns::Overrun>>,
    pub phase_stats: Vec<crate::phases::PhaseStat>,
    pub regions: Vec<crate::workload::RegionSpec>,
    /// How much the workload will do, if it said (the progress estimate's denominator).
    expected: Option<Expected>,
    /// How the run ended (set when it does).
    pub ended: Ended,
    /// The workload's accesses at the last full periodic check.
    last_full_check: u64,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Every thread exited.
    Completed,
    /// `sim.max_seconds` of simulated time passed with threads still running.
    MaxSeconds,
    /// The watcher stopped it (Ctrl-C): what was simulated so far.
    Interrupted,
}

/// A run's watcher: called now and then with the engine and its current time (cycles);
/// returns false to stop the run there.
pub type Watcher<'a> = dyn FnMut(&Sim, u64) -> bool + 'a;

/// A TLB entry a store may use without a walk: writable, and dirty already. (A dirty entry
/// need not be writable: fork write-protects dirty private pages.)
const WRITABLE_DIRTY: u32 = TLB_WRITE | TLB_DIRTY;

/// Accesses per frame and PTE between two full periodic checks: a full check costs about
/// 7.5 ns per item and a simulated access about 26 ns on the development machine (the
/// default scenario: 27 ms per check of 3.6 M items, 206 M accesses in 5.3 s), so the
/// bookkeeping checks take under 4 % of a run. A budget for the checker, not a model figure.
const FULL_CHECK_ACCESSES_PER_ITEM: u64 = 8;

/// The timer slack every task inherits (init/init_task.c: .timer_slack_ns = 50000).
const TIMER_SLACK_NS: f64 = 50_000.0;

/// A Sim for the crate's unit tests: the machine and knobs of `toml` (its `[workload]` says
/// `type = "test"`), running `threads` in one process.
#[cfg(test)]
pub(crate) fn sim_for_test(toml: &str, threads: Vec<crate::workload::ThreadSpec>) -> Sim {
    let cfg = Config::from_str_with(toml, "test.toml", None, &[]).unwrap();
    let w = crate::workload::Workload {
        name: "test".into(),
        work_unit: "ops".into(),
        processes: 1,
        files: vec![],
        threads,
        info: vec![],
        phases: vec![],
        regions: vec![],
        expected: None,
    };
    Sim::new(cfg, w).unwrap()
}

/// `sim_for_test` with one thread on CPU 0 running `ops`, run to its end.
#[cfg(test)]
pub(crate) fn run_pinned_for_test(toml: &str, ops: Vec<Op>) -> Sim {
    let thread = crate::workload::ThreadSpec {
        process: 0,
        placement: crate::workload::Placement::Pinned(0),
        stream: Box::new(crate::workload::OpList::new(ops)),
    };
    let mut sim = sim_for_test(toml, vec![thread]);
    sim.run(&mut |_| {}).unwrap();
    sim
}

impl Sim {
    /// Build the machine, boot the kernel's memory manager and place the workload's threads.
    pub fn new(cfg: Config, workload: Workload) -> Result<Sim, SimError> {
        let nproc = workload.processes.max(1);
        let hw = Machine::new(&cfg);
        let cycles_per_ns = hw.cycles_per_ns;
        let quantum = ((cfg.sim.quantum_ns * cycles_per_ns) as u64).max(1);
        let max_cycles = (cfg.sim.max_seconds * 1e9 * cycles_per_ns) as u64;
        let sample_interval = ((cfg.sim.timeline_interval_ms * 1e6 * cycles_per_ns) as u64).max(1);
        let tick = hw
            .ns_to_cycles(1e9 / crate::kernel::CONFIG_HZ as f64)
            .max(1);
        let jiffy_shift = hw.ns_to_cycles(hw.tick_offset_ns as f64) % tick;
        let k = Kernel::boot(cfg, &workload.files, nproc)?;
        let mut sim = Sim {
            hw,
            k,
            timeline: Vec::new(),
            workload_name: workload.name,
            work_unit: workload.work_unit,
            workload_info: workload.info,
            quantum,
            max_cycles,
            sample_interval,
            fatal: None,
            kswapd_due: Vec::new(),
            armed: turns::Armed::None,
            pending_wake: Vec::new(),
            asleep_until: Vec::new(),
            lapic_tick: Vec::new(),
            jiffy_shift,
            tick,
            tick_ran_from: Vec::new(),
            numa_tick: Vec::new(),
            tick_irq: Vec::new(),
            lapic_irq: Vec::new(),
            soft_expiry: Vec::new(),
            tick_kept: Vec::new(),
            woke_in_tick: Vec::new(),
            handler_left: Vec::new(),
            overrun: Vec::new(),
            phase_stats: workload
                .phases
                .iter()
                .map(|n| crate::phases::PhaseStat::named(n))
                .collect(),
            regions: workload.regions.clone(),
            expected: workload.expected,
            ended: Ended::Completed,
            last_full_check: 0,
        };
        let ncpus = sim.hw.cpus.len() as u32;
        sim.tick_ran_from = vec![0; ncpus as usize];
        sim.numa_tick = vec![false; ncpus as usize];
        sim.tick_irq = vec![false; ncpus as usize];
        for (i, spec) in workload.threads.into_iter().enumerate() {
            if spec.process >= nproc {
                return Err(SimError(format!(
                    "workload thread {i} names process {} but the workload has {nproc}",
                    spec.process
                )));
            }
            let mut thread = Thread::new(i as u32, spec.process, spec.stream);
            thread.numa_node_stamp = sim.k.init_numa_node_stamp(&sim.hw, spec.process as usize);
            thread.numa_scan_period_ms = sim.k.cfg.kernel.numa_balancing_scan_delay_ms;
            sim.k.sched.threads.push(thread);
            if let crate::workload::Placement::Pinned(c) = spec.placement {
                if c >= ncpus {
                    return Err(SimError(format!(
                        "workload thread {i} is pinned to CPU {c}, but the machine has {ncpus}"
                    )));
                }
            }
            sim.k.place_thread(&mut sim.hw, i as u32, spec.placement);
        }
        sim.k.sched.live_threads = sim.k.sched.threads.len() as u32;
        sim.k.schedule(sample_interval, Event::Sample);
        sim.k.start_vmstat_work(&sim.hw);
        Ok(sim)
    }

    /// The scenario this run simulates.
    pub fn cfg(&self) -> &Config {
        &self.k.cfg
    }

    /// The busy CPU that is furthest behind.
    fn next_cpu(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, c) in self.hw.cpus.iter().enumerate() {
            if self.k.sched.rq[i].current != NIL
                && best.is_none_or(|b| c.clock < self.hw.cpus[b].clock)
            {
                best = Some(i);
            }
        }
        best
    }

    /// Run until every thread has exited (or `sim.max_seconds`), calling `progress` with the
    /// fraction done now and then.
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), SimError> {
        self.run_watched(&mut |sim: &Sim, now| {
            progress(sim.progress(now).unwrap_or_else(|| sim.exited_fraction()));
            true
        })?;
        progress(1.0);
        Ok(())
    }

    /// Run until every thread has exited, `sim.max_seconds` passes, or `watch` (called about
    /// once per timeline interval of simulated time) returns false; `ended` says which.
    pub fn run_watched(&mut self, watch: &mut Watcher) -> Result<(), SimError> {
        if self.hw.vcpu_turns {
            return self.run_turns(watch);
        }
        let mut last_report = 0u64;
        loop {
            if self.k.sched.live_threads == 0 {
                break;
            }
            let (cpu, now) = match self.next_cpu() {
                Some(c) => (Some(c), self.hw.cpus[c].clock),
                None => match self.k.timers.next_at() {
                    Some(t) => (None, t),
                    None => return Err(self.deadlock()),
                },
            };
            if self.max_cycles > 0 && now >= self.max_cycles {
                self.ended = Ended::MaxSeconds;
                break;
            }
            self.k.now = now;
            while let Some((t, ev)) = self.k.timers.pop_due(now) {
                self.k.now = t;
                self.handle_event(ev, t);
            }
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            if let Some(c) = cpu {
                if self.k.sched.rq[c].current != NIL {
                    self.run_quantum(c, now + self.quantum);
                }
            }
            if !self.step_done(now, &mut last_report, watch)? {
                break;
            }
        }
        self.finish();
        Ok(())
    }

    /// After each step of a run loop: stop on a fatal error, else show the watcher the run
    /// now and then; false once it asked to stop (the run is then `Interrupted`).
    fn step_done(
        &mut self,
        now: u64,
        last_report: &mut u64,
        watch: &mut Watcher,
    ) -> Result<bool, SimError> {
        if let Some(e) = self.fatal.take() {
            return Err(e);
        }
        if now >= *last_report + self.sample_interval {
            *last_report = now;
            if !watch(self, now) {
                self.ended = Ended::Interrupted;
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn deadlock(&self) -> SimError {
        SimError(format!(
            "deadlock: {} threads are waiting and none can run",
            self.k.sched.live_threads
        ))
    }

    /// The fraction of the run done at `now`, when it can be told: the larger of simulated
    /// time over `sim.max_seconds` and the workload's work (or accesses) over what it said it
    /// would do.
    pub fn progress(&self, now: u64) -> Option<f64> {
        let by_time = (self.max_cycles > 0).then(|| now as f64 / self.max_cycles as f64);
        let threads = &self.k.sched.threads;
        let by_work = match self.expected {
            Some(Expected::Work(n)) if n > 0 => {
                Some(threads.iter().map(|t| t.work).sum::<u64>() as f64 / n as f64)
            }
            Some(Expected::Accesses(n)) if n > 0 => {
                Some(threads.iter().map(|t| t.accesses).sum::<u64>() as f64 / n as f64)
            }
            _ => None,
        };
        match (by_time, by_work) {
            (Some(a), Some(b)) => Some(a.max(b).min(1.0)),
            (a, b) => a.or(b).map(|f| f.min(1.0)),
        }
    }

    /// The share of threads that have exited: the only progress a workload of unknown size
    /// shows.
    fn exited_fraction(&self) -> f64 {
        let exited = self
            .k
            .sched
            .threads
            .iter()
            .filter(|t| t.state == ThreadState::Exited)
            .count();
        exited as f64 / self.k.sched.threads.len().max(1) as f64
    }

    fn handle_event(&mut self, ev: Event, t: u64) {
        match ev {
            Event::Sample => {
                self.take_sample(t);
                match self.k.checker.level {
                    CheckLevel::Off => {}
                    CheckLevel::Strict => self.k.check_invariants(&self.hw, "periodic"),
                    CheckLevel::Periodic => self.periodic_check(),
                }
                self.k.schedule(t + self.sample_interval, Event::Sample);
            }
            Event::KswapdRun(node) => self.k.kswapd_run(&mut self.hw, node as usize, t),
            Event::KswapdSleepTimeout(node) => {
                self.k.kswapd_sleep_timeout(&mut self.hw, node as usize, t)
            }
            Event::Wake(tid) => self.k.thread_wake(&mut self.hw, tid as usize, t),
            Event::VmstatUpdate(c) => self.k.vmstat_update(&self.hw, c as usize, t),
        }
    }

    /// `sim.check = "periodic"`: the TLB check at every sample; the bookkeeping checks
    /// (frames, rmap, LRU, swap), whose cost follows the machine's size, once the workload
    /// has made FULL_CHECK_ACCESSES_PER_ITEM accesses per frame and PTE they walk since the
    /// last, so they cost a few percent of the run whatever its size; and all at the end.
    fn periodic_check(&mut self) {
        let made = self.accesses();
        let items = self.k.check_items();
        if made - self.last_full_check >= FULL_CHECK_ACCESSES_PER_ITEM * items {
            self.last_full_check = made;
            self.k.check_invariants(&self.hw, "periodic");
        } else {
            self.k.check_tlb_invariants(&self.hw, "periodic");
        }
    }

    /// End of run: final sample and invariant check.
    fn finish(&mut self) {
        let end = self.hw.end_cycles();
        self.take_sample(end);
        if self.k.checker.level != CheckLevel::Off {
            self.k.check_invariants(&self.hw, "end of run");
        }
    }

    fn take_sample(&mut self, t: u64) {
        let nodes = self
            .k
            .nodes
            .iter()
            .zip(&self.hw.mem)
            .map(|(n, mem)| {
                (
                    n.zone.nr_free + n.zone.pcp_pages(),
                    n.nr_anon,
                    n.nr_file,
                    mem.accesses,
                    n.zone.pcp_pages(),
                    n.nr_anon_thps,
                )
            })
            .collect();
        let (mut tlb, mut dtlb) = (0, 0);
        for c in &self.hw.cpus {
            tlb += c.irq.tlb;
            dtlb += c.perf.get(Perf::DtlbLoadMisses);
        }
        let regions = self
            .regions
            .iter()
            .map(|r| {
                let mut per_node = vec![0u64; self.k.nodes.len()];
                let mm = r.process as usize;
                let s = (r.start >> PAGE_SHIFT) as u32;
                let e = ((r.start + r.len) >> PAGE_SHIFT) as u32;
                if mm < self.k.mms.len() {
                    // A table at a time: the per-page walk was 5 % of the default run.
                    self.k.mms[mm].pgtable.for_each_in(s, e, |p| {
                        if pte::maps_frame(p) && pte::pfn(p) != self.k.zero_pfn {
                            per_node[self.hw.node_of_pfn(pte::pfn(p))] += 1;
                        }
                    });
                }
                per_node
            })
            .collect();
        self.timeline.push(Sample {
            t_ms: self.hw.cycles_to_s(t) * 1e3,
            nodes,
            work: self.k.sched.threads.iter().map(|t| t.work).sum(),
            vm: TIMELINE_VM.iter().map(|&v| self.k.vm.get(v)).collect(),
            tlb_shootdowns: tlb,
            tlb_per_cpu: self.hw.cpus.iter().map(|c| c.irq.tlb).collect(),
            dtlb_load_misses: dtlb,
            regions,
            run_time: self.k.sched.threads.iter().map(|t| t.runtime).collect(),
            accesses: self.k.sched.threads.iter().map(|t| t.accesses).collect(),
        });
    }

    /// The current thread of `c` waits for its timer at `wake` (a pacing slot, a poll timeout),
    /// whose soft expiry is `soft` (an interrupt from then on runs it). Returns whether its
    /// quantum ends here: under vcpu_turns, arming a timer may kick every vCPU before the
    /// thread reaches schedule() (turns.rs decides, and puts it to sleep); past the timer
    /// already, clockevents_program_event programs the minimum delta, and the thread runs on
    /// once the interrupt is taken.
    fn timed_wait(&mut self, c: usize, wake: u64, soft: u64) -> bool {
        let cpu = &mut self.hw.cpus[c];
        let sleeps = cpu.clock < wake;
        if !self.hw.vcpu_turns {
            if sleeps {
                // Idle until the timer: not user time (finish_quantum subtracts it), and no
                // tick finds the thread running meanwhile.
                let ran_to = cpu.clock;
                cpu.idle_cycles += wake - ran_to;
                cpu.idle_until(wake);
                self.note_ticks(c, ran_to);
                self.tick_ran_from[c] = wake;
            }
            return false;
        }
        self.armed = if sleeps {
            turns::Armed::Sleep { wake, soft }
        } else {
            turns::Armed::MinDelta
        };
        true
    }

    /// Thread `tid` on `c` reaches `Op::PollSlot(interval_ns)`: the first opens its schedule
    /// (runtime.c samples at once); each later one moves the slot on and returns when poll's
    /// timer fires (`sim/poll_wait.rs`), None if poll returns at once.
    fn poll_slot(&mut self, c: usize, tid: usize, interval_ns: u32) -> Option<u64> {
        let now = self.hw.cpus[c].clock;
        let hw = &self.hw;
        let t = &mut self.k.sched.threads[tid];
        let Some(woke) = t.poll_woke else {
            t.pace_next = now;
            t.poll_woke = Some(now);
            return None;
        };
        let interval = hw.ns_to_cycles(interval_ns as f64).max(1);
        // The sample's span, from the timer that woke the thread for it.
        let span = now.saturating_sub(woke);
        let ms = hw.ns_to_cycles(1e6).max(1);
        let slack = |timeout_ns: u64| {
            let ns = poll_wait::poll_slack_ns(timeout_ns, TIMER_SLACK_NS as u64);
            hw.ns_to_cycles(ns as f64)
        };
        let w = poll_wait::poll_wait(t.pace_next, interval, now, span, ms, slack);
        t.pace_next = w.slot;
        t.poll_woke = Some(w.wake.unwrap_or(now));
        w.wake
    }

    /// Run the current thread of `c` until its clock reaches `until` or it blocks or exits.
    fn run_quantum(&mut self, c: usize, until: u64) {
        let tid = self.k.sched.rq[c].current as usize;
        if self.k.cpu_is_lazy(c) {
            // Back from a pacing sleep: the idle task hands the mm back (switch_mm_irqs_off
            // flushes if a flush skipped this CPU meanwhile).
            let mm = self.k.sched.threads[tid].mm as usize;
            self.k.switch_mm(&mut self.hw, c, mm);
        }
        let mut buf = std::mem::take(&mut self.k.sched.threads[tid].buf);
        let mut pos = self.k.sched.threads[tid].pos;
        let mut accesses = 0u64;
        self.k.set_share(&mut self.hw, c);
        let share = self.hw.cpus[c].share;
        let start_clock = self.hw.cpus[c].clock;
        let start_sys = self.hw.cpus[c].sys_cycles;
        self.tick_ran_from[c] = start_clock;
        let mut stop = false;
        // The last op, if it was an access that entered the kernel (a fault): the tick that
        // ends the quantum lands in it, since the op spanning a fixed instant is drawn as a
        // random tick would be, in proportion to its length, and a fault's time is kernel time.
        let mut in_fault: Option<(u64, AccessKind)> = None;
        while self.hw.cpus[c].clock < until && !stop {
            if !self.hw.huge_tlb {
                let from = pos;
                let mm = self.k.sched.threads[tid].mm as usize;
                let hot = hot_ops(
                    &mut self.hw,
                    &mut self.k.mms[mm].pgtable,
                    c,
                    buf.words(),
                    &mut pos,
                    until,
                    share,
                    &mut accesses,
                );
                if pos != from {
                    in_fault = None;
                }
                match hot {
                    Hot::Time => continue,
                    Hot::Other => {}
                    Hot::Slow(a, vpn, kind, cached) => {
                        let sys = self.hw.cpus[c].sys_cycles;
                        let cyc = self.access_slow(c, tid, a, vpn, kind, cached);
                        self.hw.cpus[c].clock += cyc * share;
                        let faulted = self.hw.cpus[c].sys_cycles != sys;
                        in_fault = faulted.then_some((a, kind));
                        if self.op_ends_quantum(c) {
                            stop = true;
                        }
                        continue;
                    }
                }
            }
            if pos == buf.len() {
                buf.clear();
                pos = 0;
                self.k.sched.threads[tid].stream.refill(&mut buf);
                if buf.is_empty() {
                    buf.push(Op::Exit);
                }
            }
            let slot = buf.slot(pos);
            pos += 1;
            in_fault = None;
            match slot {
                Slot::Access(kind, a) => {
                    accesses += 1;
                    let sys = self.hw.cpus[c].sys_cycles;
                    let cyc = self.access(c, tid, a, kind);
                    self.hw.cpus[c].clock += cyc * share;
                    let faulted = self.hw.cpus[c].sys_cycles != sys;
                    in_fault = faulted.then_some((a, kind));
                }
                Slot::Compute(n) => self.hw.cpus[c].clock += n as u64 * share,
                Slot::Mark(m) => {
                    let now = self.hw.cpus[c].clock;
                    let t = &mut self.k.sched.threads[tid];
                    match m {
                        Mark::RoiBegin => t.roi_begin = Some(now),
                        Mark::RoiEnd => t.roi_end = Some(now),
                        Mark::Work(n) => t.work += n as u64,
                        Mark::Phase(id) => {
                            // A paced phase's schedule starts at each phase instance.
                            t.pace_next = 0;
                            let cpu = &self.hw.cpus[c];
                            let run = (now - start_clock).saturating_sub(cpu.idle_cycles);
                            self.enter_phase(tid, Some(id), now, accesses, run);
                        }
                    }
                }
                Slot::Pace(ns) => {
                    let interval = self.hw.ns_to_cycles(ns as f64).max(1);
                    // Under vcpu_turns the sleep's timer fires at the slot plus the task's
                    // timer slack (hrtimer_nanosleep: current->timer_slack_ns).
                    let slack = if self.hw.vcpu_turns {
                        self.hw.ns_to_cycles(TIMER_SLACK_NS)
                    } else {
                        0
                    };
                    let t = &mut self.k.sched.threads[tid];
                    let clock = self.hw.cpus[c].clock;
                    if t.pace_next == 0 {
                        t.pace_next = t.pace_origin.take().unwrap_or(clock);
                    }
                    let soft = t.pace_next;
                    let wake = soft + slack;
                    t.pace_next += interval;
                    // The call's own run time (hrtimer_nanosleep → do_nanosleep): to a slot
                    // ahead, or past (its timer at the minimum delta).
                    let cost = &self.hw.cost;
                    let path = if clock < wake {
                        cost.nanosleep_cycles
                    } else {
                        cost.nanosleep_past_cycles
                    };
                    self.hw.charge_sys(c, path as u64);
                    stop |= self.timed_wait(c, wake, soft);
                }
                Slot::Other(i) => match buf.side(i) {
                    Op::PollSlot(ns) => {
                        if let Some(wake) = self.poll_slot(c, tid, ns) {
                            // (A poll timeout sleeps longer than a tick: the tick stops.)
                            stop |= self.timed_wait(c, wake, wake);
                        }
                    }
                    Op::PaceOrigin(ns) => {
                        let mm = self.k.sched.threads[tid].mm as usize;
                        let at =
                            self.k.sched.barrier_released[mm] + self.hw.ns_to_cycles(ns as f64);
                        self.k.sched.threads[tid].pace_origin = Some(at);
                    }
                    Op::Sleep(ns) => {
                        self.end_quantum(
                            c,
                            tid,
                            pos,
                            std::mem::take(&mut buf),
                            (start_clock, start_sys, accesses),
                        );
                        self.k.thread_sleep(&mut self.hw, c, tid, ns);
                        return;
                    }
                    Op::Madvise { addr, len, advice } => {
                        if let Err(e) = self.k.sys_madvise(&mut self.hw, c, tid, addr, len, advice)
                        {
                            self.fatal = Some(e);
                        }
                    }
                    Op::Mmap {
                        addr,
                        len,
                        prot,
                        backing,
                    } => {
                        if let Err(e) =
                            self.k
                                .sys_mmap(&mut self.hw, c, tid, addr, len, prot, backing)
                        {
                            self.fatal = Some(e);
                        }
                    }
                    Op::Munmap { addr, len } => {
                        if let Err(e) = self.k.sys_munmap(&mut self.hw, c, tid, addr, len) {
                            self.fatal = Some(e);
                        }
                    }
                    Op::Mprotect { addr, len, prot } => {
                        if let Err(e) = self.k.sys_mprotect(&mut self.hw, c, tid, addr, len, prot) {
                            self.fatal = Some(e);
                        }
                    }
                    Op::MovePages { addr, len, node } => {
                        if let Err(e) = self.k.sys_move_pages(&mut self.hw, c, tid, addr, len, node)
                        {
                            self.fatal = Some(e);
                        }
                    }
                    Op::ReadNumaMaps {
                        process,
                        cycles_per_entry,
                    } => {
                        let entries = self.k.numa_maps_entries(process as usize);
                        self.hw.cpus[c].clock += entries * cycles_per_entry as u64 * share;
                    }
                    Op::Barrier => {
                        let start = (start_clock, start_sys, accesses);
                        self.end_quantum_and_phase(c, tid, pos, std::mem::take(&mut buf), start);
                        self.k.thread_barrier(&mut self.hw, c, tid);
                        return;
                    }
                    Op::Join => {
                        let start = (start_clock, start_sys, accesses);
                        self.end_quantum_and_phase(c, tid, pos, std::mem::take(&mut buf), start);
                        self.k.thread_join(&mut self.hw, c, tid);
                        return;
                    }
                    Op::Fork => {
                        let child = self.k.sched.threads[tid].stream.fork_child();
                        let forked = match child {
                            Some(stream) => self.k.sys_fork(&mut self.hw, c, tid, stream),
                            None => Err("fork: the thread's program gives no child program".into()),
                        };
                        if let Err(e) = forked {
                            self.fatal = Some(SimError(format!("thread {tid}: {e}")));
                        }
                    }
                    Op::Exec => {
                        if let Err(e) = self.k.sys_exec(&mut self.hw, c, tid) {
                            self.fatal = Some(SimError(format!("thread {tid}: {e}")));
                        }
                    }
                    Op::Wait => {
                        if !self.k.wait_reaps(&mut self.hw, c, tid) {
                            self.end_quantum(
                                c,
                                tid,
                                pos,
                                std::mem::take(&mut buf),
                                (start_clock, start_sys, accesses),
                            );
                            self.k.wait_sleep(&mut self.hw, c, tid);
                            return;
                        }
                    }
                    Op::Send { sock, bytes, kind } => {
                        match self.k.sock_send(&mut self.hw, c, tid, sock, bytes, kind) {
                            Ok(crate::net::SockOp::Done) => {}
                            Ok(crate::net::SockOp::Sleep) => {
                                // The op runs again when the thread is woken.
                                self.end_quantum(
                                    c,
                                    tid,
                                    pos - 1,
                                    buf,
                                    (start_clock, start_sys, accesses),
                                );
                                self.k.sock_sleep(&mut self.hw, c, tid);
                                return;
                            }
                            Err(e) => self.fatal = Some(SimError(format!("thread {tid}: {e}"))),
                        }
                    }
                    Op::Recv { sock, bytes } => {
                        if self.k.sock_recv(&mut self.hw, c, tid, sock, bytes)
                            == crate::net::SockOp::Sleep
                        {
                            self.end_quantum(
                                c,
                                tid,
                                pos - 1,
                                buf,
                                (start_clock, start_sys, accesses),
                            );
                            self.k.sock_sleep(&mut self.hw, c, tid);
                            return;
                        }
                    }
                    Op::Exit => {
                        let start = (start_clock, start_sys, accesses);
                        self.end_quantum_and_phase(c, tid, pos, std::mem::take(&mut buf), start);
                        self.k.thread_exit(&mut self.hw, c, tid);
                        return;
                    }
                    Op::Load(_)
                    | Op::Store(_)
                    | Op::IFetch(_)
                    | Op::Compute(_)
                    | Op::Mark(_)
                    | Op::Pace(_) => unreachable!("OpBuf keeps these inline"),
                },
            }
            if self.op_ends_quantum(c) {
                stop = true;
            }
        }
        self.end_quantum(c, tid, pos, buf, (start_clock, start_sys, accesses));
        // scheduler_tick → task_tick_fair → task_tick_numa: only for the task a tick finds
        // running, so a paced thread whose bursts miss the ticks queues no scan work.
        if !self.hw.vcpu_turns {
            self.note_ticks(c, self.hw.cpus[c].clock);
        }
        self.k.init_numa_next_scan(&self.hw, c, tid);
        let ticked = std::mem::take(&mut self.numa_tick[c]);
        if ticked && self.k.task_tick_numa(&mut self.hw, c, tid) {
            // task_numa_work is task work, run on the return to user mode (TWA_RESUME): a
            // fault the tick interrupted returns after the scan, and its instruction runs
            // again, taking a hint fault if the scan has just made its PTE PROT_NONE.
            if let Some((a, kind)) = in_fault {
                let cyc = self.access(c, tid, a, kind);
                self.hw.cpus[c].clock += cyc * share;
            }
        }
        self.k.maybe_preempt(&mut self.hw, c);
    }

    /// Without `machine.vcpu_turns`: CPU `c`'s thread ran from `tick_ran_from` to `to`; a
    /// jiffy boundary in between is a scheduler tick that found it running.
    #[inline]
    fn note_ticks(&mut self, c: usize, to: u64) {
        let jiffy = |t: u64| (t + self.jiffy_shift) / self.tick;
        if jiffy(to) > jiffy(self.tick_ran_from[c]) {
            self.numa_tick[c] = true;
        }
        self.tick_ran_from[c] = to;
    }

    /// Whether the op just run on CPU `c` ends its quantum: a fatal error, or a flush IPI
    /// whose acknowledgements it now waits for, under vcpu_turns (sim/turns.rs `run_turn`).
    #[inline]
    fn op_ends_quantum(&self, c: usize) -> bool {
        self.fatal.is_some() || self.hw.cpus[c].ipi_wait_from.is_some()
    }

    /// The quantum of thread `tid` on CPU `c` ends with `pos` its next op in `buf`: keep them
    /// and account the quantum (`start`: the clock, system cycles and accesses it began with).
    fn end_quantum(
        &mut self,
        c: usize,
        tid: usize,
        pos: usize,
        buf: OpBuf,
        start: (u64, u64, u64),
    ) {
        self.k.sched.threads[tid].pos = pos;
        self.k.sched.threads[tid].buf = buf;
        let (start_clock, start_sys, accesses) = start;
        self.finish_quantum(c, start_clock, start_sys, accesses, tid);
    }

    /// The quantum ends at a barrier, join or exit, and so does the thread's phase.
    fn end_quantum_and_phase(
        &mut self,
        c: usize,
        tid: usize,
        pos: usize,
        buf: OpBuf,
        start: (u64, u64, u64),
    ) {
        self.end_quantum(c, tid, pos, buf, start);
        let now = self.hw.cpus[c].clock;
        self.enter_phase(tid, None, now, 0, 0);
    }

    fn finish_quantum(&mut self, c: usize, start_clock: u64, start_sys: u64, acc: u64, tid: usize) {
        let cpu = &mut self.hw.cpus[c];
        let sys = cpu.sys_cycles - start_sys;
        let idle = std::mem::take(&mut cpu.idle_cycles);
        cpu.user_cycles += (cpu.clock - start_clock).saturating_sub(sys + idle);
        self.k.sched.threads[tid].accesses += acc;
        // se.sum_exec_runtime: a paced thread sleeps (clock_nanosleep) between its slots, and
        // sleep is not run time, so task_tick_numa does not count it.
        self.k.sched.threads[tid].runtime += (cpu.clock - start_clock).saturating_sub(idle);
    }

    /// One memory access: the TLB hierarchy, then the page walk and fault path on a miss.
    /// Returns the cycles the access costs the thread (kernel time is charged separately).
    /// Inlined into run_quantum's loop (measured: 9 % of `bench`, 7 % of the instructions).
    #[inline(always)]
    fn access(&mut self, c: usize, tid: usize, vaddr: u64, kind: AccessKind) -> u64 {
        if self.hw.huge_tlb {
            return self.access_thp(c, tid, vaddr, kind);
        }
        let hw = &mut self.hw;
        let cpu = &mut hw.cpus[c];
        match tlb_fast(cpu, &mut hw.mem, &hw.node_end_pfn, &hw.cost, vaddr, kind) {
            Ok(cycles) => cycles,
            Err((vpn, cached)) => self.access_slow(c, tid, vaddr, vpn, kind, cached),
        }
    }

    /// `access` with THP possible: the 2 MiB L1 dTLB is probed after the 4 KiB one and
    /// before the STLB (in parallel in hardware), the STLB's 2 MiB entries after its 4 KiB
    /// ones. A path of its own, not inlined, so that the THP-off path stays as it was
    /// (measured: inlined, it cost the THP-off benchmark 2 %).
    #[inline(never)]
    fn access_thp(&mut self, c: usize, tid: usize, vaddr: u64, kind: AccessKind) -> u64 {
        let vpn = (vaddr >> PAGE_SHIFT) as u32;
        let store = kind == AccessKind::Store;
        let huge = kind != AccessKind::IFetch;
        let mut cached = Cached::Miss;
        if vaddr < USER_VA_END {
            let cpu = &mut self.hw.cpus[c];
            let asid = cpu.cur_asid;
            let l1 = if huge { &mut cpu.dtlb } else { &mut cpu.itlb };
            if let Some(i) = l1.lookup(vpn, asid) {
                let d = l1.data(i);
                if !store || d & WRITABLE_DIRTY == WRITABLE_DIRTY {
                    return self.mem_cycles(c, tlb_pfn(d), vaddr, store);
                }
                cached = Cached::L1;
            } else {
                if huge {
                    match self.access_huge_l1(c, vaddr, vpn, store) {
                        Some(Some(cyc)) => return cyc,
                        // A clean or read-only 2 MiB entry and a store: the walk sets D.
                        Some(None) => return self.access_slow(c, tid, vaddr, vpn, kind, cached),
                        None => {}
                    }
                }
                let cpu = &mut self.hw.cpus[c];
                let l1 = if huge { &mut cpu.dtlb } else { &mut cpu.itlb };
                if let Some(i) = cpu.stlb.lookup(vpn, asid) {
                    let d = cpu.stlb.data(i);
                    if !store || d & WRITABLE_DIRTY == WRITABLE_DIRTY {
                        l1.insert(vpn, asid, d);
                        cpu.perf.inc(Perf::StlbHits);
                        return self.hw.cost.stlb_hit_cycles as u64
                            + self.mem_cycles(c, tlb_pfn(d), vaddr, store);
                    }
                    cached = Cached::Stlb;
                } else if huge {
                    if let Some(cyc) = self.access_huge_stlb(c, vaddr, vpn, store) {
                        return cyc;
                    }
                }
            }
        }
        self.access_slow(c, tid, vaddr, vpn, kind, cached)
    }

    /// The 2 MiB L1 dTLB after a 4 KiB L1 miss: None on a miss, Some(None) for an entry a
    /// store may not use, else the access's cycles.
    #[inline]
    fn access_huge_l1(
        &mut self,
        c: usize,
        vaddr: u64,
        vpn: u32,
        store: bool,
    ) -> Option<Option<u64>> {
        let cpu = &mut self.hw.cpus[c];
        let i = cpu.dtlb_2m.lookup_huge(vpn >> 9, cpu.cur_asid)?;
        let d = cpu.dtlb_2m.data(i);
        Some(
            (!store || d & WRITABLE_DIRTY == WRITABLE_DIRTY)
                .then(|| self.mem_cycles(c, tlb_pfn(d) + (vpn & (HPAGE_PMD_NR - 1)), vaddr, store)),
        )
    }

    /// The STLB's 2 MiB entries after every other TLB missed: a hit fills the 2 MiB L1
    /// dTLB. None: no usable entry (a walk follows).
    #[inline]
    fn access_huge_stlb(&mut self, c: usize, vaddr: u64, vpn: u32, store: bool) -> Option<u64> {
        let cpu = &mut self.hw.cpus[c];
        let asid = cpu.cur_asid;
        let i = cpu.stlb.lookup_huge(vpn >> 9, asid)?;
        let d = cpu.stlb.data(i);
        if store && d & WRITABLE_DIRTY != WRITABLE_DIRTY {
            return None;
        }
        cpu.dtlb_2m.insert_huge(vpn >> 9, asid, d);
        cpu.perf.inc(Perf::StlbHits);
        Some(
            self.hw.cost.stlb_hit_cycles as u64
                + self.mem_cycles(c, tlb_pfn(d) + (vpn & (HPAGE_PMD_NR - 1)), vaddr, store),
        )
    }

    /// The data access after translation: a cache-filter hit, or the latency of the frame's
    /// node (which counts the access as memory traffic).
    #[inline(always)]
    fn mem_cycles(&mut self, c: usize, pfn: u32, vaddr: u64, store: bool) -> u64 {
        let hw = &mut self.hw;
        data_cycles(
            &mut hw.cpus[c].cache,
            &mut hw.mem,
            &hw.node_end_pfn,
            &hw.cost,
            pfn,
            vaddr,
            store,
        )
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
        cached: Cached,
    ) -> u64 {
        // The common walk, apart from the fault loop (fewer registers spilled): a present
        // 4 KiB PTE that allows the access, read and updated through one PTE-table lookup.
        if vaddr < USER_VA_END {
            let mm = self.k.sched.threads[tid].mm as usize;
            if let Some(slot) = self.k.mms[mm].pgtable.get_mut(vpn) {
                let p = *slot;
                if pte_allows(p, kind) {
                    let hw = &mut self.hw;
                    let (cycles, np) =
                        walk_fill(&mut hw.cpus[c], &hw.cost, p, vpn, kind, cached, false);
                    *slot = np;
                    let store = kind == AccessKind::Store;
                    return cycles + self.mem_cycles(c, pte::pfn(p), vaddr, store);
                }
            }
        }
        self.access_slow_loop(c, tid, vaddr, vpn, kind, cached)
    }

    /// `access_slow` in general: huge PMDs, faults (then the walk again), NUMA scan races.
    #[inline(never)]
    fn access_slow_loop(
        &mut self,
        c: usize,
        tid: usize,
        vaddr: u64,
        vpn: u32,
        kind: AccessKind,
        mut cached: Cached,
    ) -> u64 {
        let store = kind == AccessKind::Store;
        let mm = self.k.sched.threads[tid].mm as usize;
        let asid = self.hw.cpus[c].cur_asid;
        let mut cycles = 0u64;
        let mut counted = false;
        loop {
            let p = if vaddr < USER_VA_END {
                self.k.mms[mm].pgtable.get(vpn)
            } else {
                0
            };
            if p & pte::HUGE != 0 && pte::present(p) && (!store || p & pte::WRITE != 0) {
                if kind == AccessKind::IFetch {
                    // No 2 MiB iTLB is modelled: an instruction fetch from a THP walks.
                    if !counted {
                        cycles += self.hw.cost.page_walk_cycles as u64;
                        count_walk(&mut self.hw.cpus[c], kind);
                    }
                    return cycles + self.mem_cycles(c, pte::pfn(p), vaddr, store);
                }
                return cycles + self.walk_huge(c, mm, vaddr, vpn, p, store, counted);
            }
            if pte_allows(p, kind) {
                let hw = &mut self.hw;
                let (walk, np) =
                    walk_fill(&mut hw.cpus[c], &hw.cost, p, vpn, kind, cached, counted);
                cycles += walk;
                if np != p {
                    if let Some(slot) = self.k.mms[mm].pgtable.get_mut(vpn) {
                        *slot = np;
                    }
                }
                return cycles + self.mem_cycles(c, pte::pfn(p), vaddr, store);
            }
            if !counted {
                counted = true;
                cycles += self.hw.cost.page_walk_cycles as u64;
                count_walk(&mut self.hw.cpus[c], kind);
            }
            // A CPU behind the scanner in time reads a page its walk has not reached yet:
            // no hint fault, and nothing cached (the PTE is PROT_NONE from then on).
            if !store && self.k.numa_scan_ahead(&self.hw, c, p) {
                return cycles + self.mem_cycles(c, pte::pfn(p), vaddr, false);
            }
            // A faulting translation is not kept by the hardware.
            self.hw.cpus[c].flush_page(vpn, asid);
            cached = Cached::Miss;
            if let Err(e) = self.k.handle_mm_fault(&mut self.hw, c, mm, vaddr, kind) {
                self.fatal = Some(SimError(format!(
                    "thread {tid}: {e} (CPU {c}, address {vaddr:#x})"
                )));
                return cycles;
            }
        }
    }
}

impl Sim {
    /// A walk that ends at a present huge PMD allowing the access: the hardware sets the
    /// PMD's A/D bits and caches a 2 MiB entry in the L1 dTLB and the STLB.
    #[allow(clippy::too_many_arguments)]
    fn walk_huge(
        &mut self,
        c: usize,
        mm: usize,
        vaddr: u64,
        vpn: u32,
        p: u64,
        store: bool,
        counted: bool,
    ) -> u64 {
        let mut cycles = 0;
        let cpu = &mut self.hw.cpus[c];
        let asid = cpu.cur_asid;
        if !counted {
            cycles += self.hw.cost.page_walk_cycles as u64;
            count_walk(
                cpu,
                if store {
                    AccessKind::Store
                } else {
                    AccessKind::Load
                },
            );
        }
        let pmd = self.k.mms[mm].pgtable.huge_pmd(vpn);
        let mut np = pmd;
        if pmd & pte::YOUNG == 0 {
            np |= pte::YOUNG;
            cycles += self.hw.cost.accessed_bit_cycles as u64;
            cpu.perf.inc(Perf::AbitAssists);
        }
        if store && pmd & pte::DIRTY == 0 {
            np |= pte::DIRTY;
            cycles += self.hw.cost.dirty_bit_cycles as u64;
            cpu.perf.inc(Perf::DbitAssists);
        }
        let data = tlb_data(pte::pfn(pmd), np & pte::WRITE != 0, np & pte::DIRTY != 0);
        cpu.dtlb_2m.insert_huge(vpn >> 9, asid, data);
        cpu.stlb.insert_huge(vpn >> 9, asid, data);
        if np != pmd {
            self.k.mms[mm].pgtable.set_huge_pmd(vpn, np);
        }
        cycles + self.mem_cycles(c, pte::pfn(p), vaddr, store)
    }
}

/// `Sim::mem_cycles` on the machine's parts (`cache` the CPU's): the data access after
/// translation, a cache-filter hit, or the latency of the frame's node (which counts the
/// access as memory traffic).
#[inline(always)]
fn data_cycles(
    cache: &mut Option<crate::machine::cache::Cache>,
    mem: &mut [MemoryNode],
    node_end_pfn: &[u32],
    cost: &CostTable,
    pfn: u32,
    vaddr: u64,
    store: bool,
) -> u64 {
    if let Some(cache) = cache.as_mut() {
        let line = ((pfn as u64) << (PAGE_SHIFT - LINE_SHIFT)) | ((vaddr >> LINE_SHIFT) & 63);
        if cache.access(line) {
            return cost.cache_hit_cycles as u64;
        }
    }
    let node = &mut mem[node_of(node_end_pfn, pfn)];
    node.accesses += 1;
    node.latency_cycles[store as usize] as u64
}

/// `Sim::access`'s fast path with THP off, on CPU `cpu`: the L1 TLB (iTLB for fetches), then
/// the STLB with an L1 fill, each usable only if a store finds the entry writable and dirty.
/// Returns the access's cycles, or the vpn and where the TLBs found it for `access_slow`.
#[inline(always)]
fn tlb_fast(
    cpu: &mut Cpu,
    mem: &mut [MemoryNode],
    node_end_pfn: &[u32],
    cost: &CostTable,
    vaddr: u64,
    kind: AccessKind,
) -> Result<u64, (u32, Cached)> {
    let vpn = (vaddr >> PAGE_SHIFT) as u32;
    let store = kind == AccessKind::Store;
    let asid = cpu.cur_asid;
    let l1 = if kind == AccessKind::IFetch {
        &mut cpu.itlb
    } else {
        &mut cpu.dtlb
    };
    let mut cached = Cached::Miss;
    if vaddr < USER_VA_END {
        if let Some(d) = l1.lookup_data(vpn, asid) {
            if !store || d & WRITABLE_DIRTY == WRITABLE_DIRTY {
                let pfn = tlb_pfn(d);
                return Ok(data_cycles(
                    &mut cpu.cache,
                    mem,
                    node_end_pfn,
                    cost,
                    pfn,
                    vaddr,
                    store,
                ));
            }
            cached = Cached::L1;
        } else if let Some(d) = cpu.stlb.lookup_data(vpn, asid) {
            if !store || d & WRITABLE_DIRTY == WRITABLE_DIRTY {
                l1.insert(vpn, asid, d);
                cpu.perf.inc(Perf::StlbHits);
                let pfn = tlb_pfn(d);
                let data = data_cycles(&mut cpu.cache, mem, node_end_pfn, cost, pfn, vaddr, store);
                return Ok(cost.stlb_hit_cycles as u64 + data);
            }
            cached = Cached::Stlb;
        }
    }
    Err((vpn, cached))
}

/// How `hot_ops` stopped.
enum Hot {
    /// The CPU's clock reached the quantum's end.
    Time,
    /// The buffer is used up, or its next op is not one `hot_ops` runs.
    Other,
    /// An access (counted, its op consumed) that needs `access_slow`, a walk that does not end
    /// in a present 4 KiB PTE allowing it: (address, vpn, kind, where the TLBs found it).
    Slow(u64, u32, AccessKind, Cached),
}

/// The engine's inner loop, with THP off: runs CPU `c`'s ops from `words[*pos]` while they
/// are computes and accesses the TLBs translate (`Sim::access`'s fast path) or a walk of
/// `pgtable` (the thread's) ends in a present 4 KiB PTE allowing (`access_slow`'s common
/// walk), until the clock reaches `until`. The CPU, its TLBs and the op words are borrowed
/// once here, not indexed anew per access, and the clock is a local. Advances `pos` and
/// `accesses` past what it ran. Not inlined: apart from run_quantum's many live values, it
/// keeps more of its own in registers (measured: fewer instructions, the call's included).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn hot_ops(
    hw: &mut Machine,
    pgtable: &mut PageTable,
    c: usize,
    words: &[u64],
    pos: &mut usize,
    until: u64,
    share: u64,
    accesses: &mut u64,
) -> Hot {
    let Machine {
        cpus,
        mem,
        node_end_pfn,
        cost,
        ..
    } = hw;
    let cpu = &mut cpus[c];
    let mut clock = cpu.clock;
    let mut p = *pos;
    let mut acc = *accesses;
    let end = loop {
        if clock >= until {
            break Hot::Time;
        }
        let Some(&w) = words.get(p) else {
            break Hot::Other;
        };
        match OpBuf::decode(w) {
            Slot::Access(kind, vaddr) => {
                p += 1;
                acc += 1;
                match tlb_fast(cpu, mem, node_end_pfn, cost, vaddr, kind) {
                    Ok(cyc) => clock += cyc * share,
                    Err((vpn, cached)) => {
                        // The common walk here: no return to run_quantum and back per TLB miss.
                        let slot = if vaddr < USER_VA_END {
                            pgtable.get_mut(vpn)
                        } else {
                            None
                        };
                        let Some(slot) = slot.filter(|slot| pte_allows(**slot, kind)) else {
                            break Hot::Slow(vaddr, vpn, kind, cached);
                        };
                        let p = *slot;
                        let (walk, np) = walk_fill(cpu, cost, p, vpn, kind, cached, false);
                        *slot = np;
                        let store = kind == AccessKind::Store;
                        let data = data_cycles(
                            &mut cpu.cache,
                            mem,
                            node_end_pfn,
                            cost,
                            pte::pfn(p),
                            vaddr,
                            store,
                        );
                        clock += (walk + data) * share;
                    }
                }
            }
            Slot::Compute(n) => {
                p += 1;
                clock += n as u64 * share;
            }
            _ => break Hot::Other,
        }
    };
    cpu.clock = clock;
    *pos = p;
    *accesses = acc;
    end
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

/// Whether PTE `p` is a present 4 KiB entry that allows an access of `kind` (a store needs
/// the write bit): the walk ends in it without a fault.
#[inline(always)]
fn pte_allows(p: u64, kind: AccessKind) -> bool {
    p & (pte::PRESENT | pte::HUGE) == pte::PRESENT
        && (kind != AccessKind::Store || p & pte::WRITE != 0)
}

/// A walk that ends at present 4 KiB PTE `p` allowing the access, on CPU `cpu`: the walk's
/// cycles and perf counts (unless `counted`: a walk before a fault counted them), or the STLB
/// hit's for an entry found there; the A/D bits as the hardware sets them; the TLB fills (an
/// entry a store found clean is updated in place, the D-bit assist). Returns the cycles and
/// the PTE with its A/D bits set.
#[inline(always)]
fn walk_fill(
    cpu: &mut Cpu,
    cost: &CostTable,
    p: u64,
    vpn: u32,
    kind: AccessKind,
    cached: Cached,
    counted: bool,
) -> (u64, u64) {
    let store = kind == AccessKind::Store;
    let asid = cpu.cur_asid;
    let mut cycles = 0u64;
    match cached {
        Cached::Miss if !counted => {
            cycles += cost.page_walk_cycles as u64;
            count_walk(cpu, kind);
        }
        Cached::Stlb => cycles += cost.stlb_hit_cycles as u64,
        _ => {}
    }
    let mut np = p;
    if p & pte::YOUNG == 0 {
        np |= pte::YOUNG;
        cycles += cost.accessed_bit_cycles as u64;
        cpu.perf.inc(Perf::AbitAssists);
    }
    if store && p & pte::DIRTY == 0 {
        np |= pte::DIRTY;
        cycles += cost.dirty_bit_cycles as u64;
        cpu.perf.inc(Perf::DbitAssists);
    }
    let data = tlb_data(pte::pfn(p), np & pte::WRITE != 0, np & pte::DIRTY != 0);
    let l1 = if kind == AccessKind::IFetch {
        &mut cpu.itlb
    } else {
        &mut cpu.dtlb
    };
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
    debug_assert!(data & TLB_WRITE != 0 || !store);
    (cycles, np)
}
