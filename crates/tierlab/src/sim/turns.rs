//! `machine.vcpu_turns`: the CPUs run as QEMU 7.2's TCG runs a guest's vCPUs under `-icount`,
//! one at a time on one instruction clock, turn by turn.
//!
//! The rules, read in QEMU 7.2 (accel/tcg/tcg-accel-ops-rr.c rr_cpu_thread_fn): the vCPUs
//! take turns in CPU order, each continuing after the last; a halted vCPU is passed over
//! (`cpu_can_run`). A turn may run every instruction up to the machine's next timer deadline
//! (tcg-accel-ops-icount.c `icount_prepare_for_run` → `icount_get_limit`), and ends there,
//! when the vCPU halts, or when any vCPU arms a timer earlier than every pending one
//! (softmmu/cpus.c `qemu_timer_notify_cb` → `rr_kick_vcpu_thread` kicks every vCPU). The
//! deadlines are the guest's ticks, its threads' wake-ups and pacing slots, and kswapd's timed
//! sleeps. Time a vCPU spends waiting for its turn still runs on the guest's clock, so a
//! thread that was running when its turn ended accrues it as run time (`sum_exec_runtime`);
//! a vCPU that halted accrues idle time, since its wake-up interrupt is taken in its next turn.
//!
//! Not modelled: the 100 ms TCG kick timer (`rr_kick_thread`; the 4 ms ticks end turns
//! sooner), and a spinning vCPU's `pause` ending its turn (x86 `helper_pause`), so a flush
//! IPI's sender keeps its turn while it waits. Measured in the guest but not modelled yet: a
//! thread behind its slot by more than its timer slack (50 µs) keeps its turn, since its
//! timer is programmed at the minimum delta, and each tick's re-arm kicks the turn on.

use super::{Sim, SimError};
use crate::kernel::Event;
use crate::mm::page::NIL;

/// The guest kernel's tick rate: Debian's linux-image-6.12 amd64 config has CONFIG_HZ=250.
/// Busy CPUs tick on the same jiffy boundaries (tick_sched_timer without skew_tick).
const GUEST_HZ: f64 = 250.0;

impl Sim {
    /// `run` under `machine.vcpu_turns`.
    pub(super) fn run_turns(&mut self, progress: &mut dyn FnMut(f64)) -> Result<(), SimError> {
        let ncpus = self.hw.cpus.len();
        self.kswapd_due = vec![false; self.k.nodes.len()];
        let tick = self.hw.ns_to_cycles(1e9 / GUEST_HZ).max(1);
        let mut now = 0u64;
        let mut last = ncpus - 1;
        let mut last_report = 0u64;
        loop {
            if self.k.sched.live_threads == 0 {
                break;
            }
            if self.max_cycles > 0 && now >= self.max_cycles {
                break;
            }
            self.deliver_due(now);
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            let next = (1..=ncpus)
                .map(|i| (last + i) % ncpus)
                .find(|&c| self.vcpu_runnable(c, now));
            match next {
                Some(c) => {
                    let end = self.turn_deadline(now, tick);
                    now = now.max(self.run_turn(c, now, end));
                    last = c;
                }
                // Every vCPU halted: the clock warps to the next deadline (icount sleep=off).
                None => match self.next_wakeup(now) {
                    Some(t) => now = t,
                    None => return Err(self.deadlock()),
                },
            }
            self.step_done(now, &mut last_report, progress)?;
        }
        self.finish();
        progress(1.0);
        Ok(())
    }

    /// Timer events due by `t`; kswapd's steps wait for its CPU's turn.
    fn deliver_due(&mut self, t: u64) {
        while let Some((at, ev)) = self.k.timers.pop_due(t) {
            self.k.now = at;
            match ev {
                Event::KswapdRun(n) => self.kswapd_due[n as usize] = true,
                ev => self.handle_event(ev, at),
            }
        }
    }

    /// The node whose kswapd has a step due on CPU `c`.
    fn kswapd_due_on(&self, c: usize) -> Option<usize> {
        (0..self.kswapd_due.len())
            .find(|&n| self.kswapd_due[n] && self.k.kswapd_cpu(&self.hw, n) == c)
    }

    /// Whether vCPU `c` has work at `t`: kswapd, or a thread that is not waiting for a
    /// later pacing slot.
    fn vcpu_runnable(&self, c: usize, t: u64) -> bool {
        self.kswapd_due_on(c).is_some()
            || (self.k.sched.rq[c].current != NIL && self.hw.cpus[c].clock <= t)
    }

    /// The earliest wake-up after `t`: a timer event, or a CPU's pacing slot (a CPU whose
    /// clock is past `t` with a thread on it is waiting for its thread's slot).
    fn next_wakeup(&self, t: u64) -> Option<u64> {
        let slots = (0..self.hw.cpus.len())
            .filter(|&c| self.k.sched.rq[c].current != NIL && self.hw.cpus[c].clock > t)
            .map(|c| self.hw.cpus[c].clock);
        self.k.timers.next_at().into_iter().chain(slots).min()
    }

    /// When a turn from `t` must end: the machine's next timer deadline (icount_get_limit),
    /// the next tick or the next wake-up.
    fn turn_deadline(&self, t: u64, tick: u64) -> u64 {
        let next_tick = (t / tick + 1) * tick;
        self.next_wakeup(t).map_or(next_tick, |w| w.min(next_tick))
    }

    /// CPU `c`'s turn from `t` until `end`: kswapd's due steps, then its thread. Returns when
    /// the turn ended: where the CPU's clock stopped, or where it halted to wait.
    fn run_turn(&mut self, c: usize, t: u64, end: u64) -> u64 {
        let cpu = &mut self.hw.cpus[c];
        if cpu.clock < t {
            let tid = self.k.sched.rq[c].current;
            // Halted (or never ran) until now: idle; else its thread kept the CPU while the
            // others ran, and the guest's clock counted that as the thread's run time.
            if tid == NIL || cpu.clock == cpu.idle_to {
                cpu.idle_until(t);
            } else {
                self.k.sched.threads[tid as usize].runtime += t - cpu.clock;
                cpu.clock = t;
            }
        }
        if let Some(n) = self.kswapd_due_on(c) {
            while self.hw.cpus[c].clock < end && self.kswapd_due[n] {
                self.kswapd_due[n] = false;
                let at = self.hw.cpus[c].clock;
                self.k.now = at;
                self.k.kswapd_run(&mut self.hw, n, at);
                self.deliver_due(self.hw.cpus[c].clock);
            }
        }
        self.turn_over = false;
        while !self.turn_over
            && self.fatal.is_none()
            && self.k.sched.rq[c].current != NIL
            && self.hw.cpus[c].clock < end
        {
            let until = end.min(self.hw.cpus[c].clock + self.quantum);
            self.run_quantum(c, until);
        }
        let cpu = &self.hw.cpus[c];
        if cpu.clock == cpu.idle_to && cpu.idle_from < cpu.idle_to {
            cpu.idle_from.max(t)
        } else {
            cpu.clock
        }
    }
}
