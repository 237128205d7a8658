//! The scheduler: workload threads on CPUs (pinned or spread), time slices when a CPU has
//! more than one runnable thread, barriers, exit; idle CPUs enter lazy TLB mode.

use crate::kernel::{Event, Kernel};
use crate::machine::Machine;
use crate::mm::page::NIL;
use crate::workload::{OpBuf, Placement, ThreadStream};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Runnable,
    AtBarrier,
    Sleeping,
    /// In pthread_join until the process's other threads have exited.
    Joining,
    /// In wait(2) until a child process exits.
    Waiting,
    /// Asleep in send or recv until the other side of its socket makes progress.
    SockWait,
    Exited,
}

/// A workload thread: its program (the op stream) and what task_struct keeps about it.
pub struct Thread {
    pub id: u32,
    pub mm: u32,
    pub stream: Box<dyn ThreadStream>,
    pub buf: OpBuf,
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
    /// The rest of the task's NUMA-balancing state (fault statistics, placement).
    pub numab: crate::mm::numa_placement::TaskNuma,
    /// Next slot of `Op::Pace` rate control (0: not started) or of `Op::PollSlot`.
    pub pace_next: u64,
    /// When the thread's last `Op::PollSlot` returned (its sample's start); None until its
    /// first opens the schedule.
    pub poll_woke: Option<u64>,
    /// Where the next schedule's first slot falls (`Op::PaceOrigin`), if set.
    pub pace_origin: Option<u64>,
    /// Phase the thread is in (Mark::Phase).
    pub phase: Option<u32>,
    /// `runtime` when the thread entered that phase.
    pub phase_runtime_begin: u64,
    /// The thread that forked this one's process (NIL: started with the workload, or its
    /// parent exited first and init reaps it).
    pub parent: u32,
    /// Child processes forked that have not exited (their threads' ids).
    pub children: Vec<u32>,
    /// Child processes that have exited and wait(2) has not reaped (zombies).
    pub zombies: u32,
}

impl Thread {
    /// A runnable thread of process `mm` that has not run yet.
    pub fn new(id: u32, mm: u32, stream: Box<dyn ThreadStream>) -> Thread {
        Thread {
            id,
            mm,
            stream,
            buf: OpBuf::with_capacity(2048),
            pos: 0,
            state: ThreadState::Runnable,
            cpu: NIL,
            roi_begin: None,
            roi_end: None,
            work: 0,
            accesses: 0,
            runtime: 0,
            numa_node_stamp: 0,
            numa_scan_period_ms: 0,
            numab: crate::mm::numa_placement::TaskNuma::new(),
            pace_next: 0,
            poll_woke: None,
            pace_origin: None,
            phase: None,
            phase_runtime_begin: 0,
            parent: NIL,
            children: Vec::new(),
            zombies: 0,
        }
    }
}

/// One CPU's run queue.
#[derive(Clone, Debug)]
pub struct RunQueue {
    /// Thread running here (NIL: idle).
    pub current: u32,
    pub queue: VecDeque<u32>,
    /// When the current thread's slice ends.
    pub slice_end: u64,
    /// rq->idle_stamp: when the CPU last went idle.
    pub idle_stamp: u64,
}

impl RunQueue {
    /// Whether the CPU has a thread to run.
    pub fn busy(&self) -> bool {
        self.current != NIL || !self.queue.is_empty()
    }
}

pub struct Scheduler {
    pub threads: Vec<Thread>,
    pub rq: Vec<RunQueue>,
    /// Threads waiting at a barrier, per process.
    pub barrier_waiting: Vec<Vec<u32>>,
    /// When each process's last barrier released its threads (cycles).
    pub barrier_released: Vec<u64>,
    pub live_threads: u32,
}

impl Scheduler {
    pub fn new(ncpus: usize, nproc: usize) -> Scheduler {
        let rq = RunQueue {
            current: NIL,
            queue: VecDeque::new(),
            slice_end: 0,
            idle_stamp: 0,
        };
        Scheduler {
            threads: Vec::new(),
            rq: vec![rq; ncpus],
            barrier_waiting: vec![Vec::new(); nproc],
            barrier_released: vec![0; nproc],
            live_threads: 0,
        }
    }
}

impl Kernel {
    /// Put a new thread on a CPU's run queue (select_task_rq at fork: the idlest CPU).
    pub(crate) fn place_thread(&mut self, m: &mut Machine, tid: u32, placement: Placement) {
        let c = match placement {
            Placement::Pinned(c) => c as usize,
            Placement::Spread => self.idlest_cpu(),
        };
        self.sched.threads[tid as usize].cpu = c as u32;
        let mm = self.sched.threads[tid as usize].mm as usize;
        self.mms[mm].nr_threads += 1;
        self.enqueue(m, c, tid);
    }

    /// The CPU with the fewest threads (find_idlest_cpu, by run-queue length); among idle
    /// ones the most recently idled, whose cache may still be warm
    /// (sched_balance_find_dst_group_cpu's latest_idle_timestamp), then the lowest-numbered.
    pub(crate) fn idlest_cpu(&self) -> usize {
        let load = |i: usize| {
            let rq = &self.sched.rq[i];
            rq.queue.len() + (rq.current != NIL) as usize
        };
        (0..self.sched.rq.len())
            .min_by_key(|&i| {
                let load = load(i);
                let idle_stamp = if load == 0 {
                    self.sched.rq[i].idle_stamp
                } else {
                    0
                };
                (load, std::cmp::Reverse(idle_stamp), i)
            })
            .unwrap_or(0)
    }

    /// Make `tid` runnable on CPU `c`; an idle CPU starts it at once (after `c`'s idle time).
    fn enqueue(&mut self, m: &mut Machine, c: usize, tid: u32) {
        if self.sched.rq[c].current == NIL {
            self.start_thread(m, c, tid);
        } else {
            self.sched.rq[c].queue.push_back(tid);
        }
    }

    fn start_thread(&mut self, m: &mut Machine, c: usize, tid: u32) {
        let mm = self.sched.threads[tid as usize].mm as usize;
        self.sched.rq[c].current = tid;
        self.switch_mm(m, c, mm);
        let slice = m.ns_to_cycles(self.cfg.kernel.sched_base_slice_ns as f64);
        self.sched.rq[c].slice_end = m.cpus[c].clock + slice;
    }

    /// The current thread stopped running here: run the next one or go idle (lazy TLB).
    pub(crate) fn pick_next(&mut self, m: &mut Machine, c: usize) {
        self.sched.rq[c].current = NIL;
        if let Some(next) = self.sched.rq[c].queue.pop_front() {
            m.charge_sys(c, m.cost.context_switch_cycles as u64);
            self.start_thread(m, c, next);
        } else {
            self.sched.rq[c].idle_stamp = m.cpus[c].clock;
            self.enter_lazy_tlb(c);
        }
    }

    /// End of slice with others waiting: round-robin.
    pub(crate) fn maybe_preempt(&mut self, m: &mut Machine, c: usize) {
        let rq = &self.sched.rq[c];
        if rq.current != NIL && !rq.queue.is_empty() && m.cpus[c].clock >= rq.slice_end {
            let cur = rq.current;
            self.sched.rq[c].queue.push_back(cur);
            self.pick_next(m, c);
        }
    }

    /// A thread reached a barrier: wait until every live thread of its process has.
    pub(crate) fn thread_barrier(&mut self, m: &mut Machine, c: usize, tid: usize) {
        self.sched.threads[tid].state = ThreadState::AtBarrier;
        let mm = self.sched.threads[tid].mm as usize;
        self.sched.barrier_waiting[mm].push(tid as u32);
        self.pick_next(m, c);
        self.maybe_release_barrier(m, mm);
    }

    /// Threads of `mm` that have neither exited nor are waiting in pthread_join: the ones a
    /// barrier waits for, and the ones a join waits out.
    fn active_threads(&self, mm: usize) -> usize {
        self.sched
            .threads
            .iter()
            .filter(|t| {
                t.mm as usize == mm
                    && !matches!(t.state, ThreadState::Exited | ThreadState::Joining)
            })
            .count()
    }

    fn maybe_release_barrier(&mut self, m: &mut Machine, mm: usize) {
        let live = self.active_threads(mm);
        let s = &self.sched;
        let waiting = &s.barrier_waiting[mm];
        if waiting.is_empty() || waiting.len() < live {
            return;
        }
        let waiting = std::mem::take(&mut self.sched.barrier_waiting[mm]);
        // Everyone leaves when the last one arrives.
        let release = waiting
            .iter()
            .map(|&t| m.cpus[self.sched.threads[t as usize].cpu as usize].clock)
            .max()
            .unwrap_or(0);
        self.sched.barrier_released[mm] = release;
        for t in waiting {
            self.make_runnable(m, t, release);
        }
    }

    /// Thread `tid` can run again from `t` on its CPU (an idle CPU waits until then).
    pub(crate) fn make_runnable(&mut self, m: &mut Machine, tid: u32, t: u64) {
        self.sched.threads[tid as usize].state = ThreadState::Runnable;
        let c = self.sched.threads[tid as usize].cpu as usize;
        if self.sched.rq[c].current == NIL {
            m.cpus[c].idle_until(t);
        }
        self.enqueue(m, c, tid);
    }

    pub(crate) fn thread_exit(&mut self, m: &mut Machine, c: usize, tid: usize) {
        self.sched.threads[tid].state = ThreadState::Exited;
        self.sched.live_threads -= 1;
        let mm = self.sched.threads[tid].mm as usize;
        self.mms[mm].nr_threads -= 1;
        self.exit_process(m, c, tid);
        self.pick_next(m, c);
        self.maybe_release_barrier(m, mm);
        self.maybe_end_join(m, mm, m.cpus[c].clock);
    }

    /// pthread_join of every other thread: leave the CPU until they have exited.
    pub(crate) fn thread_join(&mut self, m: &mut Machine, c: usize, tid: usize) {
        self.sched.threads[tid].state = ThreadState::Joining;
        let mm = self.sched.threads[tid].mm as usize;
        self.pick_next(m, c);
        // The others may be waiting at a barrier that no longer counts this thread.
        self.maybe_release_barrier(m, mm);
        self.maybe_end_join(m, mm, m.cpus[c].clock);
    }

    /// The last other thread of `mm` exited at `t`: the joining threads return.
    fn maybe_end_join(&mut self, m: &mut Machine, mm: usize, t: u64) {
        if self.active_threads(mm) > 0 {
            return;
        }
        let joiners: Vec<u32> = (0..self.sched.threads.len() as u32)
            .filter(|&i| {
                let x = &self.sched.threads[i as usize];
                x.mm as usize == mm && x.state == ThreadState::Joining
            })
            .collect();
        for tid in joiners {
            self.make_runnable(m, tid, t);
        }
    }

    /// `machine.shared_core`: how many times longer work takes on CPU `c` from its clock on,
    /// itself and every other CPU busy then: QEMU's round-robin TCG shares one instruction
    /// clock among the busy vCPUs (tcg-accel-ops-rr.c; README "The guest's vCPUs take turns"
    /// says in what turns, which this average does not model).
    pub(crate) fn set_share(&self, m: &mut Machine, c: usize) {
        if !m.shared_core || m.vcpu_turns {
            return;
        }
        let t = m.cpus[c].clock;
        let others = (m.cpus.iter().enumerate())
            .filter(|&(d, cpu)| {
                d != c
                    && if t < cpu.clock {
                        cpu.worked_at(t)
                    } else {
                        self.sched.rq[d].busy()
                    }
            })
            .count();
        m.cpus[c].share = 1 + others as u64;
    }

    /// nanosleep: leave the CPU; an event brings the thread back.
    pub(crate) fn thread_sleep(&mut self, m: &mut Machine, c: usize, tid: usize, ns: u64) {
        self.sched.threads[tid].state = ThreadState::Sleeping;
        let at = m.cpus[c].clock + m.ns_to_cycles(ns as f64);
        self.schedule(at, Event::Wake(tid as u32));
        self.pick_next(m, c);
    }

    /// The sleep is over: back on the thread's CPU.
    pub(crate) fn thread_wake(&mut self, m: &mut Machine, tid: usize, t: u64) {
        if self.sched.threads[tid].state != ThreadState::Sleeping {
            return;
        }
        self.make_runnable(m, tid as u32, t);
    }
}
