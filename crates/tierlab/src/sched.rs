//! The scheduler: workload threads on CPUs (pinned or spread), time slices when a CPU has
//! more than one runnable thread, barriers, exit; idle CPUs enter lazy TLB mode.

use crate::mm::page::NIL;
use crate::sim::{Sim, ThreadState};
use crate::workload::Placement;

impl Sim {
    /// Put a new thread on a CPU's run queue (select_task_rq at fork: the idlest CPU).
    pub(crate) fn place_thread(&mut self, tid: u32, placement: Placement) {
        let c = match placement {
            Placement::Pinned(c) => c as usize,
            Placement::Spread => {
                let load = |i: usize| {
                    let cpu = &self.cpus[i];
                    cpu.runqueue.len() + (cpu.current != NIL) as usize
                };
                (0..self.cpus.len())
                    .min_by_key(|&i| (load(i), i))
                    .unwrap_or(0)
            }
        };
        self.threads[tid as usize].cpu = c as u32;
        let mm = self.threads[tid as usize].mm as usize;
        self.mms[mm].users += 1;
        self.enqueue(c, tid);
    }

    /// Make `tid` runnable on CPU `c`; an idle CPU starts it at once (after `c`'s idle time).
    fn enqueue(&mut self, c: usize, tid: u32) {
        if self.cpus[c].current == NIL {
            self.start_thread(c, tid);
        } else {
            self.cpus[c].runqueue.push_back(tid);
        }
    }

    fn start_thread(&mut self, c: usize, tid: u32) {
        let mm = self.threads[tid as usize].mm as usize;
        self.cpus[c].current = tid;
        self.switch_mm(c, mm);
        let slice = self.ns_to_cycles(self.cfg.kernel.sched_base_slice_ns as f64);
        self.cpus[c].slice_end = self.cpus[c].clock + slice;
    }

    /// The current thread stopped running here: run the next one or go idle (lazy TLB).
    pub(crate) fn pick_next(&mut self, c: usize) {
        self.cpus[c].current = NIL;
        if let Some(next) = self.cpus[c].runqueue.pop_front() {
            self.charge_sys(c, self.cost.context_switch_cycles as u64);
            self.start_thread(c, next);
        } else {
            self.enter_lazy_tlb(c);
        }
    }

    /// End of slice with others waiting: round-robin.
    pub(crate) fn maybe_preempt(&mut self, c: usize) {
        let cpu = &self.cpus[c];
        if cpu.current != NIL && !cpu.runqueue.is_empty() && cpu.clock >= cpu.slice_end {
            let cur = cpu.current;
            self.cpus[c].runqueue.push_back(cur);
            self.pick_next(c);
        }
    }

    /// A thread reached a barrier: wait until every live thread of its process has.
    pub(crate) fn thread_barrier(&mut self, c: usize, tid: usize) {
        self.threads[tid].state = ThreadState::AtBarrier;
        let mm = self.threads[tid].mm as usize;
        self.barrier_waiting[mm].push(tid as u32);
        self.pick_next(c);
        self.maybe_release_barrier(mm);
    }

    fn maybe_release_barrier(&mut self, mm: usize) {
        let live = self
            .threads
            .iter()
            .filter(|t| t.mm as usize == mm && t.state != ThreadState::Exited)
            .count();
        let waiting = &self.barrier_waiting[mm];
        if waiting.is_empty() || waiting.len() < live {
            return;
        }
        let waiting = std::mem::take(&mut self.barrier_waiting[mm]);
        // Everyone leaves when the last one arrives.
        let release = waiting
            .iter()
            .map(|&t| self.cpus[self.threads[t as usize].cpu as usize].clock)
            .max()
            .unwrap_or(0);
        for t in waiting {
            self.threads[t as usize].state = ThreadState::Runnable;
            let c = self.threads[t as usize].cpu as usize;
            if self.cpus[c].current == NIL {
                self.cpus[c].clock = self.cpus[c].clock.max(release);
            }
            self.enqueue(c, t);
        }
    }

    pub(crate) fn thread_exit(&mut self, c: usize, tid: usize) {
        self.threads[tid].state = ThreadState::Exited;
        self.live_threads -= 1;
        let mm = self.threads[tid].mm as usize;
        self.mms[mm].users -= 1;
        self.pick_next(c);
        self.maybe_release_barrier(mm);
    }
}

impl Sim {
    /// nanosleep: leave the CPU; an event brings the thread back.
    pub(crate) fn thread_sleep(&mut self, c: usize, tid: usize, ns: u64) {
        self.threads[tid].state = ThreadState::Sleeping;
        let at = self.cpus[c].clock + self.ns_to_cycles(ns as f64);
        self.schedule(at, crate::sim::Event::Wake(tid as u32));
        self.pick_next(c);
    }

    /// The sleep is over: back on the thread's CPU.
    pub(crate) fn thread_wake(&mut self, tid: usize, t: u64) {
        if self.threads[tid].state != ThreadState::Sleeping {
            return;
        }
        self.threads[tid].state = ThreadState::Runnable;
        let c = self.threads[tid].cpu as usize;
        if self.cpus[c].current == NIL {
            self.cpus[c].clock = self.cpus[c].clock.max(t);
        }
        self.enqueue(c, tid as u32);
    }
}
