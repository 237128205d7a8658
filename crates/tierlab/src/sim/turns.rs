//! `machine.vcpu_turns`: the CPUs run as QEMU 7.2's TCG runs a guest's vCPUs under `-icount`,
//! one at a time on one instruction clock, turn by turn.
//!
//! The rules, read in QEMU 7.2 (accel/tcg/tcg-accel-ops-rr.c rr_cpu_thread_fn) and checked
//! against ftrace in the guest (`validate --trace`): the vCPUs take turns in CPU order; a
//! halted vCPU is passed over. A turn may run every instruction up to the machine's next
//! timer deadline (tcg-accel-ops-icount.c `icount_prepare_for_run` → `icount_get_limit`), and
//! ends there, when the vCPU halts, or at a kick: arming a timer earlier than every pending
//! one (softmmu/cpus.c `qemu_timer_notify_cb` → `rr_kick_vcpu_thread`) sets every vCPU's
//! `exit_request`, so the next vCPU in order starts a new round. A paced thread's
//! `clock_nanosleep` arms its slot plus the 50 µs timer slack; one already past that gets a
//! minimum-delta timer (1 µs), so the next vCPU runs until it expires, the one after it finds
//! it expired and runs nothing, the next runs to the next deadline, and the thread itself
//! runs on when the round comes back to it. The deadlines are the guest's ticks, its threads' wake-ups and pacing
//! timers, and kswapd's timed sleeps. Each CPU's tick is its own LAPIC timer: a busy CPU
//! re-arms it for the next jiffy whenever it takes a timer interrupt (its tick, a pacing or
//! minimum-delta timer) or leaves a halt, at the end of the handler
//! (`cost.timer_interrupt_cycles`), and QEMU fires it at the LAPIC's 16 ns rounding
//! (machine/lapic.rs); a re-arm strictly earlier than every pending timer kicks. So after a
//! tick the CPU that re-arms first kicks (nothing else is pending), and the second keeps the
//! turn to the next tick unless its rounding lands earlier; a reader behind schedule runs
//! batches until one of its re-arms lands before the busy CPU's tick. A vCPU whose budget
//! is zero because a timer has expired runs nothing: it runs the timers
//! (icount_prepare_for_run), and the vCPU after it takes the turn. A turn ends at its
//! deadline to the instruction, so an op that runs past it (task_numa_work's walk, a kswapd
//! step, a timer interrupt's handler) is cut there and its rest runs in the CPU's next turn,
//! after the others'. A CPU whose thread sleeps less than a tick keeps its tick
//! (cpuidle_idle_call → tick_nohz_idle_retain_tick when the governor clears stop_tick for a
//! predicted sleep shorter than TICK_NSEC, as menu_select does; traced: the guest's reader
//! CPUs retained it 19,757 times and stopped it 84 times in half a second of reading),
//! and a tick that comes before the thread's timer runs that timer too once its soft expiry,
//! the slot, has passed (__hrtimer_run_queues): the thread wakes in the tick's handler, in
//! the idle task, and runs after the handler's re-arm, so that tick does not find it
//! running, and if the re-arm kicks it runs only in the CPU's next turn. Two reader CPUs
//! whose ticks do this at one jiffy both re-arm for the next, and a busy vCPU (the
//! harness's sampler reading numa_maps) then keeps the turn to it: the readers stall for
//! whole ticks, as the guest's do, and catch up across ticks. Time a vCPU spends waiting for its turn
//! still runs on the guest's clock, so a thread that was running when its turn ended accrues
//! it as run time (`sum_exec_runtime`); a vCPU that halted accrues idle time.
//!
//! At a busy CPU's tick, a kswapd waiting behind its thread is pulled by the first idle CPU
//! (kernel/sched/fair.c nohz_balancer_kick → _nohz_idle_balance), at once. Only a kswapd
//! woken there that has not run since waits: once it has run it is the running task (its
//! steps run before the thread), and can_migrate_task refuses that one (task_on_cpu). The
//! balance intervals that can hold the kick back a few ms (nohz.next_balance,
//! rq->next_balance) are not modelled, nor which of the two runs until then (kswapd first
//! here; EEVDF decides).
//!
//! A flush IPI's sender spins in csd_lock_wait on PAUSE, and QEMU's x86 `helper_pause`
//! leaves the vCPU's loop ("Just let another CPU run", EXCP_INTERRUPT): its turn ends where
//! the wait begins, the other vCPUs take theirs (the targets handle the IPI in them), and
//! the rest of its op runs when the round comes back, as after a cut at a deadline.
//!
//! Not modelled: the 100 ms TCG kick timer (`rr_kick_thread`; the 4 ms ticks end turns
//! sooner); a second flush in the same op passing the turn on again (task_numa_work flushes
//! once per VMA it changes; only its first flush does here); the handlers' own variation in
//! length beyond where they end within the LAPIC's 16 ns count (one measured cost for every
//! timer interrupt, where the guest's differ by microseconds with the work each tick finds;
//! that point within the count, which decides whose re-armed tick fires first, is drawn:
//! `machine.lapic_handler_phase`).

use super::{Ended, Sim, SimError, Watcher};
use crate::kernel::Event;
use crate::machine::lapic;
use crate::mm::page::NIL;

/// A minimum-delta timer a thread armed: pending until it expires at this time (the next
/// vCPU to run gets the instructions before that), or expired and not yet taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MinDelta {
    None,
    Pending(u64),
    Expired,
}

/// The clockevent's minimum delta, ns: cev_delta2ns raises the LAPIC's 15 counts to 1 µs
/// (kernel/time/clockevents.c), which the kernel writes as 62 counts (traced).
const MIN_DELTA_NS: u64 = 1_000;

/// The timer a paced thread's `clock_nanosleep` armed in its CPU's turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Armed {
    None,
    /// The thread sleeps until `wake` (its slot plus the timer slack); from `soft` (its
    /// slot) any timer interrupt on its CPU runs the timer.
    Sleep {
        wake: u64,
        soft: u64,
    },
    /// The slot and slack had passed: the timer is programmed at the minimum delta
    /// (clockevents_program_event), and the thread runs on once it is taken.
    MinDelta,
}

impl Sim {
    /// `run` under `machine.vcpu_turns`: rr_cpu_thread_fn's loop. A round runs the vCPUs in
    /// CPU order from where the last one stopped (from the first after a full pass), each
    /// with a budget up to the next timer deadline, and ends early at a vCPU whose
    /// exit_request a kick has set: that vCPU starts the next round. A kick
    /// (qemu_timer_notify_cb → rr_kick_vcpu_thread) sets every vCPU's exit_request and
    /// happens when a vCPU arms a timer earlier than every pending one: a pacing sleep's
    /// timer, a minimum-delta one, or a re-armed tick.
    pub(super) fn run_turns(&mut self, watch: &mut Watcher) -> Result<(), SimError> {
        let ncpus = self.hw.cpus.len();
        self.kswapd_due = vec![false; self.k.nodes.len()];
        self.pending_wake = vec![0; ncpus];
        self.asleep_until = vec![None; ncpus];
        self.overrun = vec![None; ncpus];
        self.lapic_irq = vec![false; ncpus];
        self.soft_expiry = vec![0; ncpus];
        self.tick_kept = vec![false; ncpus];
        self.woke_in_tick = vec![false; ncpus];
        self.handler_left = vec![None; ncpus];
        // A jiffy, and where the jiffies lie (`tick_offset_ns`): both set in Sim::new. Busy
        // CPUs tick on the same jiffy boundaries (tick_sched_timer without skew_tick).
        let tick = self.tick;
        // Every CPU ticks on the first jiffy, as the machine ran before the workload.
        let first = tick - self.jiffy_shift;
        self.lapic_tick = vec![Some(self.lapic_expiry(0, first)); ncpus];
        let mut now = 0u64;
        let mut last_report = 0u64;
        let mut start: Option<usize> = None;
        let mut exit_request = vec![false; ncpus];
        let mut min_delta = MinDelta::None;
        loop {
            if self.k.sched.live_threads == 0 {
                break;
            }
            if self.max_cycles > 0 && now >= self.max_cycles {
                self.ended = Ended::MaxSeconds;
                break;
            }
            self.deliver_due(now);
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
            // icount_handle_deadline runs the expired timers at the start of a round.
            if min_delta == MinDelta::Expired {
                min_delta = MinDelta::None;
            }
            self.run_expired_ticks(now);
            let full_pass = start.is_none();
            let mut ran = false;
            let mut cur = Some(start.unwrap_or(0));
            while let Some(c) = cur {
                if exit_request[c] {
                    break;
                }
                let budget = min_delta != MinDelta::Expired && !self.ticks_expired(now);
                if budget && self.tick_kept[c] && self.lapic_irq[c] {
                    // The tick it kept in a short halt has fired: the handler runs in the
                    // idle task, and runs the thread's timer too if its soft expiry is past.
                    self.tick_kept[c] = false;
                    if let Some((at, kicks)) = self.tick_in_halt(c, now) {
                        ran = true;
                        if kicks {
                            kick(&mut exit_request, c);
                        }
                        now = at;
                        cur = (c + 1 < ncpus).then_some(c + 1);
                        continue;
                    }
                }
                let runnable = self.vcpu_runnable(c, now);
                if !runnable {
                    // (A halted target would take the IPI and halt again.)
                    self.answer_ipis(c);
                    // Halted: its tick is stopped (tick_nohz_idle_stop_tick), or its LAPIC
                    // holds the earlier wake-up timer the wake-ups list, unless it sleeps
                    // less than a tick with the tick first (kept, `sleep_until`).
                    if !self.tick_kept[c] {
                        self.lapic_tick[c] = None;
                    }
                }
                if min_delta == MinDelta::Expired || self.run_expired_ticks(now) {
                    // Its budget is zero: icount_prepare_for_run runs the expired timers
                    // instead, raising their CPUs' interrupts.
                    min_delta = MinDelta::None;
                    ran = true;
                } else if runnable {
                    ran = true;
                    // With a budget the vCPU takes its pending interrupts first, the flush
                    // IPIs among them (their flush_tlb_func ran at the send here).
                    self.answer_ipis(c);
                    if self.hw.cpus[c].ipi_wait_targets != 0 {
                        // Its csd_lock_wait still spins for a target that has had no budget
                        // since (its turn ran only the expired timers): PAUSE passes the turn
                        // on again. (Its own timer interrupt waits for its next turn here.)
                        cur = (c + 1 < ncpus).then_some(c + 1);
                        continue;
                    }
                    // Back from its kick, the thread reaches schedule(): the round it waited
                    // for was its run time; it sleeps unless its timer fired meanwhile (then
                    // the interrupt woke it first, and it runs on).
                    if std::mem::take(&mut self.tick_kept[c]) && self.lapic_irq[c] {
                        // Its timer came in the same turn as the tick it kept: the tick's
                        // handler, in the idle task, ran the timer.
                        self.woke_in_tick[c] = true;
                    }
                    let wake = std::mem::take(&mut self.pending_wake[c]);
                    if wake != 0 {
                        self.accrue_wait(c, now);
                        if wake > now {
                            self.lapic_irq[c] = false;
                            self.tick_irq[c] = false;
                            self.sleep_until(c, wake);
                            cur = (c + 1 < ncpus).then_some(c + 1);
                            continue;
                        }
                    }
                    // After a minimum-delta kick its budget ends where that timer expires,
                    // about 1 µs on, and the vCPU after it finds the timer expired.
                    let budget_end = match min_delta {
                        MinDelta::Pending(expiry) => {
                            min_delta = MinDelta::Expired;
                            expiry
                        }
                        _ => u64::MAX,
                    };
                    let carried = self.resume_overrun(c, now);
                    let end = self.turn_deadline(now, Some(c)).min(budget_end);
                    let handler = self.take_timer_interrupt(c, now, end, tick);
                    if let Handler::Cut | Handler::Rearmed { kicks: true, .. } = handler {
                        // The handler ran to the deadline (its rest waits for the CPU's next
                        // turn), or its re-armed tick is the machine's earliest timer and
                        // the kick ends the turn in the handler: the round goes on.
                        now = match handler {
                            Handler::Rearmed { at, .. } => at,
                            _ => end,
                        };
                        if let Some(by_thread) = carried {
                            self.overrun[c] = Some(Overrun {
                                from: now,
                                by_thread,
                            });
                        }
                        if handler != Handler::Cut {
                            kick(&mut exit_request, c);
                        }
                        cur = (c + 1 < ncpus).then_some(c + 1);
                        continue;
                    }
                    // The thread a tick woke is switched in once the handler has run.
                    self.woke_in_tick[c] = false;
                    // (Its own clock, past `now` while it finishes an op, is no deadline.)
                    let end = self.turn_deadline(now, Some(c)).min(budget_end);
                    let (stop, by_thread, end) = self.run_turn(c, now, end);
                    // An op ran past the deadline: its turn ended there in the middle of the
                    // op, and the other vCPUs take their turns before the rest of it runs. (A
                    // clock past the deadline with nothing run is a thread's pacing slot.)
                    if let Some(by_thread) = by_thread.or(carried).filter(|_| stop > end) {
                        self.overrun[c] = Some(Overrun {
                            from: end,
                            by_thread,
                        });
                    }
                    now = now.max(stop.min(end));
                    // (Taken: a turn that ran nothing leaves the last one's timer behind.)
                    match std::mem::replace(&mut self.armed, Armed::None) {
                        Armed::Sleep { wake, soft } => {
                            self.soft_expiry[c] = soft;
                            if wake < self.turn_deadline(now, Some(c)) {
                                // The earliest timer kicks inside hrtimer_start, before the
                                // thread calls schedule(): it stays on its CPU meanwhile.
                                kick(&mut exit_request, c);
                                self.pending_wake[c] = wake;
                                self.lapic_irq[c] = true;
                                self.lapic_tick[c] = None;
                            } else {
                                self.sleep_until(c, wake);
                            }
                        }
                        Armed::MinDelta => {
                            kick(&mut exit_request, c);
                            self.lapic_irq[c] = true;
                            self.lapic_tick[c] = None;
                            let min_delta_cycles = self.hw.ns_to_cycles(MIN_DELTA_NS as f64);
                            min_delta =
                                MinDelta::Pending(self.lapic_expiry(now, now + min_delta_cycles));
                        }
                        Armed::None => {}
                    }
                    if !self.vcpu_runnable(c, now)
                        && self.pending_wake[c] == 0
                        && !self.tick_kept[c]
                    {
                        // Its thread slept or left and nothing else runs there: it halts.
                        self.lapic_tick[c] = None;
                    }
                }
                cur = (c + 1 < ncpus).then_some(c + 1);
            }
            if let Some(c) = cur {
                exit_request[c] = false;
            }
            start = cur;
            if !ran && full_pass && cur.is_none() {
                // Every vCPU halted: the clock warps to the next deadline (icount sleep=off).
                match self.next_wakeup(now) {
                    Some(t) => now = t,
                    None => return Err(self.deadlock()),
                }
            }
            if !self.step_done(now, &mut last_report, watch)? {
                break;
            }
        }
        self.finish();
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
        self.overrun[c].is_some()
            || self.kswapd_due_on(c).is_some()
            || (self.k.sched.rq[c].current != NIL && self.hw.cpus[c].clock <= t)
    }

    /// The wake-ups pending after `t`: timer events (only those that are timer deadlines of
    /// the machine unless `all_events`), and the pacing timers of CPUs other than `except` (a
    /// CPU whose clock is past `t` with a thread on it waits for its slot).
    fn wakeups(
        &self,
        t: u64,
        except: Option<usize>,
        all_events: bool,
    ) -> impl Iterator<Item = u64> + '_ {
        // (A CPU that kept its tick in a short halt has its LAPIC on the tick, not on its
        // thread's timer: that timer is the kernel's, no deadline of QEMU's.)
        let slots = (0..self.hw.cpus.len())
            .filter(move |&c| Some(c) != except)
            .filter(move |&c| self.overrun[c].is_none() && !self.tick_kept[c])
            .filter(move |&c| self.k.sched.rq[c].current != NIL && self.hw.cpus[c].clock > t)
            .map(|c| self.hw.cpus[c].clock);
        // Timers armed by kicked threads that have not reached schedule() yet, and those of
        // threads asleep while kswapd runs on their CPU.
        let armed = (0..self.pending_wake.len())
            .filter(move |&c| Some(c) != except && self.pending_wake[c] > t)
            .map(|c| self.pending_wake[c]);
        let asleep = (0..self.asleep_until.len())
            .filter(move |&c| Some(c) != except)
            .filter_map(|c| self.asleep_until[c])
            .filter(move |&w| w > t);
        let event = if all_events {
            self.k.timers.next_at()
        } else {
            self.k.timers.next_deadline()
        };
        event.into_iter().chain(slots).chain(armed).chain(asleep)
    }

    /// The earliest wake-up after `t`.
    fn next_wakeup(&self, t: u64) -> Option<u64> {
        let kept = (0..self.tick_kept.len())
            .filter(|&c| self.tick_kept[c])
            .filter_map(|c| self.lapic_tick[c]);
        self.wakeups(t, None, true).chain(kept).min()
    }

    /// The machine's next timer deadline after `t` (icount_get_limit): the CPUs' next ticks
    /// or the next wake-up, leaving out CPU `except`'s own pacing timer.
    fn turn_deadline(&self, t: u64, except: Option<usize>) -> u64 {
        self.timers_after(t, except, None)
    }

    /// The earliest pending timer after `t`, leaving out CPU `except_slot`'s pacing timer and
    /// CPU `except_tick`'s tick (u64::MAX if none).
    fn timers_after(&self, t: u64, except_slot: Option<usize>, except_tick: Option<usize>) -> u64 {
        let ticks = (0..self.lapic_tick.len())
            .filter(move |&c| Some(c) != except_tick)
            .filter_map(|c| self.lapic_tick[c]);
        self.wakeups(t, except_slot, false)
            .chain(ticks)
            .fold(u64::MAX, u64::min)
    }

    /// A vCPU's budget at `t` is zero if a CPU's tick has expired (icount_get_limit):
    /// icount_prepare_for_run runs the expired timers instead, and each raises its CPU's
    /// interrupt. Returns whether any had.
    fn run_expired_ticks(&mut self, t: u64) -> bool {
        let mut any = false;
        for c in 0..self.lapic_tick.len() {
            if self.lapic_tick[c].is_some_and(|e| e <= t) {
                self.lapic_tick[c] = None;
                self.lapic_irq[c] = true;
                self.tick_irq[c] = true;
                any = true;
            }
        }
        any
    }

    /// Whether a CPU's tick has expired by `t` (the vCPU about to run would get no budget).
    fn ticks_expired(&self, t: u64) -> bool {
        self.lapic_tick.iter().any(|e| e.is_some_and(|e| e <= t))
    }

    /// Halted CPU `c` takes at `t` the tick it kept (`sleep_until`). hrtimer_interrupt runs
    /// every timer whose soft expiry has passed: if its thread's has, the thread wakes and
    /// is switched in after the handler (None: its turn goes on as a woken CPU's, in
    /// `take_timer_interrupt`). Else the handler runs in the idle task and programs the LAPIC
    /// for the thread's timer (tick_program_event): returns when it ends and whether that
    /// timer, the machine's earliest, kicks.
    fn tick_in_halt(&mut self, c: usize, t: u64) -> Option<(u64, bool)> {
        if self.soft_expiry[c] <= t {
            self.hw.cpus[c].interrupt_idle(t);
            self.woke_in_tick[c] = true;
            return None;
        }
        self.lapic_irq[c] = false;
        let at = t + self.hw.cost.timer_interrupt_cycles as u64 + self.handler_phase(c, t);
        let wake = self.hw.cpus[c].clock;
        Some((at, wake < self.timers_after(at, Some(c), None)))
    }

    /// Busy CPU `c`, its turn running from `t` to `end`, takes the timer interrupt it has (its
    /// tick, or a minimum-delta or wake-up timer it armed) or, out of a halt, restarts its
    /// tick (tick_nohz_idle_exit): the handler runs (`cost.timer_interrupt_cycles`; the
    /// interrupted thread's run time, as Debian's kernel has no IRQ_TIME_ACCOUNTING) and
    /// re-arms the tick, unless the deadline cuts it first.
    fn take_timer_interrupt(&mut self, c: usize, t: u64, end: u64, tick: u64) -> Handler {
        let (left, interrupted) = match self.handler_left[c].take() {
            Some(rest) => rest,
            None => {
                // A thread a tick woke in the idle task is not running yet: not interrupted.
                let interrupted = std::mem::take(&mut self.lapic_irq[c]) && !self.woke_in_tick[c];
                if !interrupted && self.lapic_tick[c].is_some() {
                    return Handler::None;
                }
                // The tick interrupted the CPU's thread: scheduler_tick runs task_tick_numa
                // for it (its task work, the scan, runs when the quantum after returns).
                if std::mem::take(&mut self.tick_irq[c])
                    && interrupted
                    && self.k.sched.rq[c].current != NIL
                {
                    self.numa_tick[c] = true;
                }
                let phase = self.handler_phase(c, t);
                (
                    self.hw.cost.timer_interrupt_cycles as u64 + phase,
                    interrupted,
                )
            }
        };
        self.accrue_wait(c, t);
        let ran = left.min(end.saturating_sub(t));
        let tid = self.k.sched.rq[c].current;
        if !interrupted {
            // Out of a halt the handler runs in the idle task, and the thread it wakes is
            // not running yet: a wait after it is no run time (accrue_wait).
            self.hw.cpus[c].idle_until(t + ran);
        } else if self.hw.cpus[c].halted() && self.hw.cpus[c].clock > t {
            // The CPU halts past `t`, its thread asleep until its timer: the tick came in the
            // rest of a cut op before that halt (kswapd's step, woken out of it), which the
            // handler delays, or in the halt, where it runs in the idle task. The thread
            // runs none of it.
            let cpu = &mut self.hw.cpus[c];
            if cpu.idle_from > t {
                cpu.delay_work(ran);
                cpu.sys_cycles += ran;
            }
        } else {
            self.hw.charge_sys(c, ran);
            if tid != NIL {
                self.k.sched.threads[tid as usize].runtime += ran;
            }
        }
        if ran < left {
            self.handler_left[c] = Some((left - ran, interrupted));
            return Handler::Cut;
        }
        let at = t + ran;
        if interrupted && tid != NIL {
            // The tick's sched_balance_trigger: an idle CPU may pull a kswapd waiting here.
            self.k.nohz_idle_pull_kswapd(&self.hw, c, at);
        }
        Handler::Rearmed {
            at,
            kicks: self.rearm_tick(c, at, tick),
        }
    }

    /// How far into the LAPIC's 16 ns count CPU `c`'s handler taken at `t` runs on
    /// (`machine.lapic_handler_phase`): the guest's handlers differ by microseconds, so where
    /// one ends within a count is even odds. A hash of (seed, CPU, time), apart from the
    /// kernel's generator, so that drawing it moves no other draw.
    fn handler_phase(&self, c: usize, t: u64) -> u64 {
        if !self.hw.lapic_handler_phase {
            return 0;
        }
        let count = self.hw.ns_to_cycles(16.0).max(1);
        let key = self.k.cfg.scenario.seed ^ (c as u64).rotate_left(48) ^ t;
        crate::splitmix::splitmix64(key) % count
    }

    /// CPU `c` programs its LAPIC for its next tick at `t` (hrtimer_interrupt →
    /// tick_program_event, or tick_nohz_idle_exit after a halt) and returns whether that
    /// timer kicks: QEMU inserts it after every timer that expires no later
    /// (timer_mod_ns_locked), and only a new head of the list notifies (timerlist_rearm →
    /// qemu_timer_notify_cb). Busy CPUs tick on the same jiffies (no skew_tick), so which
    /// CPU's tick comes first is a matter of the LAPIC's rounding (`lapic_expiry`).
    fn rearm_tick(&mut self, c: usize, t: u64, tick: u64) -> bool {
        let next_jiffy = ((t + self.jiffy_shift) / tick + 1) * tick - self.jiffy_shift;
        let expiry = self.lapic_expiry(t, next_jiffy);
        self.lapic_tick[c] = Some(expiry);
        expiry < self.timers_after(t, Some(c), Some(c))
    }

    /// When QEMU's LAPIC timer, programmed at `t` for `target`, fires (machine/lapic.rs).
    /// The guest's clock is the instruction clock (its tsc_khz is 999,999, measured), so its
    /// nanoseconds are QEMU's virtual ones.
    fn lapic_expiry(&self, t: u64, target: u64) -> u64 {
        let ns = |cycles: u64| (cycles as f64 / self.hw.cycles_per_ns).round() as u64;
        let expiry = lapic::expiry_ns(ns(t), ns(target), self.hw.lapic_mult);
        self.hw.ns_to_cycles(expiry as f64)
    }

    /// CPU `c`'s turn from `t` until `end`: kswapd's due steps, then its thread. Returns when
    /// the turn ended (where the CPU's clock stopped, or where it halted to wait), whether
    /// its thread ran (None: the rest of an op ran through the whole turn), and the turn's
    /// deadline: `end`, or earlier where the CPU began to wait for a flush IPI's
    /// acknowledgements. That wait spins on PAUSE (csd_lock_wait → cpu_relax), and QEMU's
    /// x86 `helper_pause` leaves the vCPU's loop (EXCP_INTERRUPT): the other vCPUs take
    /// their turns, the targets handling the IPI in theirs, before the rest of the op runs.
    fn run_turn(&mut self, c: usize, t: u64, end: u64) -> (u64, Option<bool>, u64) {
        self.accrue_wait(c, t);
        self.hw.cpus[c].ipi_wait_from = None;
        let kswapd = self.kswapd_due_on(c);
        if kswapd.is_some() && self.asleep_until[c].is_none() {
            // kswapd's wake-up ends the halt of a CPU whose thread sleeps until a later timer
            // (its CPU was idle, so select_idle_sibling put kswapd there): kswapd runs now.
            self.asleep_until[c] = self.hw.cpus[c].interrupt_idle(t);
        }
        if self.hw.cpus[c].clock >= end {
            return (self.work_end(c, t), None, end);
        }
        if let Some(n) = kswapd {
            while self.hw.cpus[c].clock < end
                && self.kswapd_due[n]
                && self.hw.cpus[c].ipi_wait_from.is_none()
            {
                self.kswapd_due[n] = false;
                let at = self.hw.cpus[c].clock;
                self.k.now = at;
                self.k.kswapd_run(&mut self.hw, n, at);
                self.deliver_due(self.hw.cpus[c].clock);
            }
        }
        if let Some(wake) = self.asleep_until[c] {
            // The thread's timer fired while kswapd ran (it runs after kswapd, as a thread
            // sharing kswapd's CPU does), or kswapd slept first and the CPU halts again.
            let cpu = &mut self.hw.cpus[c];
            if cpu.clock >= wake || !kswapd.is_some_and(|n| self.kswapd_due[n]) {
                cpu.idle_until(wake);
                self.asleep_until[c] = None;
            }
        }
        self.armed = Armed::None;
        let thread_runs = self.hw.cpus[c].clock < end && self.hw.cpus[c].ipi_wait_from.is_none();
        while self.armed == Armed::None
            && self.fatal.is_none()
            && self.k.sched.rq[c].current != NIL
            && self.hw.cpus[c].clock < end
            && self.hw.cpus[c].ipi_wait_from.is_none()
        {
            let until = end.min(self.hw.cpus[c].clock + self.quantum);
            // The kernel's `now` is the running CPU's clock (as run_watched sets it per
            // quantum): a kswapd woken from a fault is scheduled there, not at the last
            // event delivered, which may lie a whole sample back.
            self.k.now = self.hw.cpus[c].clock;
            self.run_quantum(c, until);
        }
        let end = self.hw.cpus[c]
            .ipi_wait_from
            .map_or(end, |w| end.min(w.max(t)));
        (self.work_end(c, t), Some(thread_runs), end)
    }

    /// Where CPU `c`'s work in a turn from `t` stopped: where it halted if it is halted now
    /// (its clock then stands at the timer that wakes it, which is no work), else its clock.
    fn work_end(&self, c: usize, t: u64) -> u64 {
        let cpu = &self.hw.cpus[c];
        if cpu.halted() {
            cpu.idle_from.max(t)
        } else {
            cpu.clock
        }
    }

    /// CPU `c`'s turn comes at `t` with the rest of an op its last turn cut off at its
    /// deadline: the rest ends as much later as the other vCPUs ran meanwhile, and a thread
    /// (not kswapd), current all along, accrues that as run time (sum_exec_runtime on the
    /// one clock). Returns whose op it was, if there was one.
    fn resume_overrun(&mut self, c: usize, t: u64) -> Option<bool> {
        let o = self.overrun[c].take()?;
        let waited = t.saturating_sub(o.from);
        // The op's rest ends `waited` later; a halt after it (kswapd's step, then the CPU's
        // thread sleeps on) still ends at the timer that wakes it.
        self.hw.cpus[c].delay_work(waited);
        let tid = self.k.sched.rq[c].current;
        if tid != NIL && o.by_thread {
            self.k.sched.threads[tid as usize].runtime += waited;
        }
        Some(o.by_thread)
    }

    /// CPU `c` has answered every flush IPI sent to it.
    fn answer_ipis(&mut self, c: usize) {
        if c < 64 {
            for cpu in &mut self.hw.cpus {
                cpu.ipi_wait_targets &= !(1u64 << c);
            }
        }
    }

    /// CPU `c`'s turn comes at `t`. Halted (or never ran) until then: idle; else its thread
    /// kept the CPU while the others ran, and the guest's clock counted that as its run time.
    fn accrue_wait(&mut self, c: usize, t: u64) {
        let cpu = &mut self.hw.cpus[c];
        if cpu.clock < t {
            let tid = self.k.sched.rq[c].current;
            if tid == NIL || cpu.clock == cpu.idle_to || self.asleep_until[c].is_some() {
                cpu.idle_until(t);
            } else {
                self.k.sched.threads[tid as usize].runtime += t - cpu.clock;
                cpu.clock = t;
            }
        }
    }

    /// CPU `c`'s paced thread calls schedule() and sleeps until its timer: the CPU halts, and
    /// the idle task keeps the mm in lazy TLB mode, so a flush meanwhile skips it
    /// (should_flush_tlb) and switch_mm_irqs_off catches up when the thread is back.
    fn sleep_until(&mut self, c: usize, wake: u64) {
        let from = self.hw.cpus[c].clock;
        self.hw.cpus[c].idle_until(wake);
        // The idle governor keeps the tick for a sleep shorter than a tick (cpuidle_idle_call
        // → tick_nohz_idle_retain_tick); the LAPIC then holds the earlier of the tick and the
        // thread's timer.
        let short = wake.saturating_sub(from) < self.tick;
        let keep = short && self.lapic_tick[c].is_some_and(|e| e < wake);
        if !keep {
            self.lapic_tick[c] = None;
        }
        self.tick_kept[c] = keep;
        self.k.enter_lazy_tlb(c);
    }
}

/// An op that ran past its turn's deadline: where the turn ended, and whether it was the
/// thread's (else a kswapd step, whose wait is nobody's run time).
#[derive(Clone, Copy, Debug)]
pub(super) struct Overrun {
    from: u64,
    by_thread: bool,
}

/// What a CPU's timer interrupt did at the start of its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    /// It had none to take.
    None,
    /// The turn's deadline came first; the rest of the handler runs in its next turn.
    Cut,
    /// The handler re-armed the tick at `at`; `kicks` if that is the machine's earliest timer.
    Rearmed { at: u64, kicks: bool },
}

/// A kick: every vCPU's exit_request is set; the running one's is spent as it leaves.
fn kick(exit_request: &mut [bool], running: usize) {
    exit_request.fill(true);
    exit_request[running] = false;
}

#[cfg(test)]
mod tests {
    use super::{Handler, Overrun};
    use crate::mm::page::NIL;
    use crate::workload::{Op, OpList, Placement, ThreadSpec};
    use crate::Sim;

    /// Two vCPUs on one instruction clock; thread 0 on CPU 0, CPU 1 empty.
    fn two_vcpus() -> Sim {
        let text = r#"
[machine]
cpus = 2
shared_core = true
vcpu_turns = true
lapic_handler_phase = false
[[machine.nodes]]
name = "dram"
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-1"
[workload]
type = "test"
"#;
        let thread = ThreadSpec {
            process: 0,
            placement: Placement::Pinned(0),
            stream: Box::new(OpList::new(vec![Op::Compute(1_000)])),
        };
        let mut sim = crate::sim::sim_for_test(text, vec![thread]);
        sim.soft_expiry = vec![0; 2];
        sim.tick_kept = vec![false; 2];
        sim.woke_in_tick = vec![false; 2];
        sim
    }

    #[test]
    fn a_handler_ends_anywhere_within_the_lapics_count_when_drawn_and_nowhere_else_when_not() {
        let mut sim = two_vcpus();
        assert!((0..100).all(|k| sim.handler_phase(k % 2, k as u64 * 4_000_000) == 0));
        sim.hw.lapic_handler_phase = true;
        // 16 ns at the machine's 2.2 GHz: 35 possible points, every one of them among 1,000
        // ticks' draws.
        let count = sim.hw.ns_to_cycles(16.0);
        assert_eq!(count, 35);
        let mut seen = vec![false; count as usize];
        for k in 0..1_000u64 {
            let phase = sim.handler_phase((k % 2) as usize, k * 4_000_000);
            assert!(phase < count);
            seen[phase as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        // Keyed by the seed too: another seed draws another sequence.
        let first: Vec<u64> = (0..8)
            .map(|k| sim.handler_phase(0, k * 4_000_000))
            .collect();
        sim.k.cfg.scenario.seed ^= 1;
        let other: Vec<u64> = (0..8)
            .map(|k| sim.handler_phase(0, k * 4_000_000))
            .collect();
        assert_ne!(first, other);
    }

    #[test]
    fn a_cpu_halted_less_than_a_tick_keeps_its_tick_and_its_handler_wakes_the_thread() {
        // Thread 0 on CPU 0 sleeps from 1 ms; its CPU's tick is armed for the jiffy at 4 ms.
        let mut sim = two_vcpus();
        let cycles_per_ms = sim.hw.ns_to_cycles(1e6);
        let ms = move |x: f64| (x * cycles_per_ms as f64).round() as u64;
        let tick = ms(4.0);
        sim.lapic_tick = vec![Some(tick), None];
        sim.lapic_irq = vec![false; 2];
        sim.handler_left = vec![None; 2];
        sim.asleep_until = vec![None; 2];
        sim.overrun = vec![None; 2];
        sim.pending_wake = vec![0; 2];
        sim.numa_tick = vec![false; 2];
        sim.tick_irq = vec![false; 2];
        sim.k.sched.rq[0].current = 0;
        sim.k.sched.rq[1].current = NIL;
        let halt_at = move |sim: &mut Sim, wake: u64, soft: u64| {
            sim.hw.cpus[0].clock = ms(1.0);
            sim.lapic_tick[0] = Some(tick);
            sim.soft_expiry[0] = soft;
            sim.sleep_until(0, wake);
        };
        // Asleep 3.05 ms, past the jiffy: the tick stays armed (the idle governor keeps it
        // for a sleep shorter than a tick), and the LAPIC fires it first.
        halt_at(&mut sim, ms(4.05), ms(4.0));
        assert!(sim.tick_kept[0]);
        assert_eq!(sim.lapic_tick[0], Some(tick));
        // Asleep longer than a tick: the tick is stopped.
        halt_at(&mut sim, ms(5.5), ms(5.45));
        assert!(!sim.tick_kept[0]);
        assert_eq!(sim.lapic_tick[0], None);
        // Asleep to 3 ms, before the jiffy: the LAPIC holds the thread's timer.
        halt_at(&mut sim, ms(3.0), ms(2.95));
        assert!(!sim.tick_kept[0]);
        assert_eq!(sim.lapic_tick[0], None);
        // The kept tick fires at 4 ms, past the thread's soft expiry (its slot, 4 ms): the
        // handler runs the thread's timer as well. The thread is switched in after the
        // handler, which runs in the idle task: the tick did not find it running.
        halt_at(&mut sim, ms(4.05), ms(4.0));
        sim.run_expired_ticks(tick);
        assert!(sim.lapic_irq[0]);
        // Its LAPIC fired the tick: the thread's timer is the kernel's, no QEMU deadline, so
        // CPU 1's turn may run past it (to the next tick, as the guest's busy vCPU did).
        assert!(sim.timers_after(tick, Some(1), Some(1)) > ms(4.05));
        sim.tick_kept[0] = false;
        assert_eq!(sim.timers_after(tick, Some(1), Some(1)), ms(4.05));
        sim.tick_kept[0] = true;
        assert_eq!(sim.tick_in_halt(0, tick), None);
        assert_eq!(sim.hw.cpus[0].clock, tick);
        sim.tick_irq[0] = true;
        let handler = sim.take_timer_interrupt(0, tick, u64::MAX, tick);
        assert!(matches!(handler, Handler::Rearmed { .. }), "{handler:?}");
        assert_eq!(sim.k.sched.threads[0].runtime, 0);
        assert!(!sim.numa_tick[0]);
        assert!(sim.hw.cpus[0].idle_at(tick + 1));
        // A thread ahead of its slot (soft expiry 4.001 ms) sleeps on through the tick to
        // its timer; the handler ends 3,500 cycles on, with the CPU still halted.
        halt_at(&mut sim, ms(4.051), ms(4.001));
        sim.run_expired_ticks(tick);
        let (at, _kicks) = sim.tick_in_halt(0, tick).expect("still asleep");
        assert_eq!(at, tick + sim.hw.cost.timer_interrupt_cycles as u64);
        assert!(!sim.lapic_irq[0]);
        assert_eq!(sim.hw.cpus[0].clock, ms(4.051));
        assert!(sim.hw.cpus[0].halted());
    }

    #[test]
    fn an_idle_cpu_pulls_kswapd_from_a_busy_cpu_at_that_cpus_tick() {
        // kswapd of the node, woken onto CPU 0 where thread 0 runs, waits there; CPU 1 is
        // idle. CPU 0's tick kicks the idle CPU (nohz_balancer_kick, nr_running 2), which
        // pulls kswapd.
        let setup = |thread_on_cpu0: bool, kswapd_waiting: bool| {
            let mut sim = two_vcpus();
            sim.lapic_irq = vec![true, false];
            sim.lapic_tick = vec![None; 2];
            sim.handler_left = vec![None; 2];
            sim.asleep_until = vec![None; 2];
            sim.overrun = vec![None; 2];
            sim.pending_wake = vec![0; 2];
            sim.k.sched.rq[0].current = if thread_on_cpu0 { 0 } else { NIL };
            sim.k.sched.rq[1].current = NIL;
            sim.k.nodes[0].kswapd_awake = true;
            sim.k.nodes[0].kswapd_waiting = kswapd_waiting;
            sim.k.nodes[0].kswapd_prev_cpu = Some(0);
            let tick = sim.hw.ns_to_cycles(4e6);
            let handler = sim.take_timer_interrupt(0, 1_000, 1_000_000, tick);
            assert!(matches!(handler, Handler::Rearmed { .. }), "{handler:?}");
            sim.k.nodes[0].kswapd_prev_cpu
        };
        assert_eq!(setup(true, true), Some(1));
        // kswapd alone on CPU 0 (nr_running 1): nothing to balance, it stays.
        assert_eq!(setup(false, true), Some(0));
        // kswapd has run since its wake-up: it is the running task (its steps run before the
        // thread), which can_migrate_task does not move (task_on_cpu).
        assert_eq!(setup(true, false), Some(0));
    }

    #[test]
    fn an_op_cut_at_a_deadline_before_a_halt_resumes_for_its_rest_and_halts_again() {
        // CPU 1's kswapd step ran from 900 to 1,300, past its turn's deadline at 1,000, and
        // the CPU then halted until a timer at 50,000 (its thread sleeping to its slot). Its
        // turn comes back at 2,000: the step's 300 cycles of rest run, to 2,300, and the CPU
        // halts again until 50,000. Its turn is then over: it holds no turn while halted
        // (counting the halt as the step's rest gave it every turn to 50,000).
        let mut sim = two_vcpus();
        sim.overrun = vec![None; 2];
        sim.asleep_until = vec![None; 2];
        sim.kswapd_due = vec![false; 1];
        let c = 1;
        sim.hw.cpus[c].clock = 1_300;
        sim.hw.cpus[c].idle_until(50_000);
        sim.overrun[c] = Some(Overrun {
            from: 1_000,
            by_thread: false,
        });
        assert_eq!(sim.resume_overrun(c, 2_000), Some(false));
        let (stop, thread_ran, end) = sim.run_turn(c, 2_000, 6_000);
        assert_eq!(stop, 2_300);
        assert_eq!(thread_ran, None);
        assert_eq!(end, 6_000);
        let cpu = &sim.hw.cpus[c];
        assert_eq!(
            (cpu.idle_from, cpu.idle_to, cpu.clock),
            (2_300, 50_000, 50_000)
        );
        // A tick in that rest (its LAPIC re-armed when kswapd's wake-up ended the halt)
        // delays the rest by its handler, 3,500 cycles; the CPU still halts until 50,000,
        // and the thread asleep there gains no run time.
        sim.lapic_irq = vec![false, true];
        sim.lapic_tick = vec![None; 2];
        sim.handler_left = vec![None; 2];
        sim.pending_wake = vec![0; 2];
        sim.k.sched.rq[c].current = 0;
        sim.hw.cpus[c].clock = 1_300;
        sim.hw.cpus[c].idle_until(50_000);
        let tick = sim.hw.ns_to_cycles(4e6);
        let handler = sim.take_timer_interrupt(c, 1_000, 6_000, tick);
        assert!(matches!(handler, Handler::Rearmed { .. }), "{handler:?}");
        let cpu = &sim.hw.cpus[c];
        assert_eq!(
            (cpu.idle_from, cpu.idle_to, cpu.clock),
            (4_800, 50_000, 50_000)
        );
        assert_eq!(sim.k.sched.threads[0].runtime, 0);
        // A rest that reaches past the timer leaves the CPU busy to the rest's end.
        sim.hw.cpus[c].clock = 1_300;
        sim.hw.cpus[c].idle_until(1_500);
        sim.overrun[c] = Some(Overrun {
            from: 1_000,
            by_thread: false,
        });
        sim.resume_overrun(c, 2_000);
        assert_eq!(sim.hw.cpus[c].clock, 2_300);
        assert!(!sim.hw.cpus[c].idle_at(2_200));
    }
}
