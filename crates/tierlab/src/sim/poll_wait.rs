//! `Op::PollSlot`: how `tierlab validate`'s sampler waits for its next sample. The C program
//! (runtime.c `sampler_process`) moves its slot on by the interval, at least the sample's own
//! span ahead, and waits with poll(2), whose timeout is in whole milliseconds, rounded up; the
//! kernel's hrtimer for it fires at the timeout's end plus poll's slack (fs/select.c
//! `select_estimate_accuracy`: 0.1 % of the timeout, at least the task's timer_slack_ns), as
//! the CPU is idle and no earlier interrupt runs it at its soft expiry. So the sampler's
//! wake-ups drift against a fixed grid by its sample's length modulo a millisecond.

/// fs/select.c MAX_SLACK: poll's slack is at most 100 ms.
const MAX_SLACK_NS: u64 = 100_000_000;

/// The slack poll(2) gives a timeout of `timeout_ns` for a task of nice 0 (fs/select.c
/// `__estimate_accuracy`, divfactor 1000), at least `timer_slack_ns` (select_estimate_accuracy).
pub(crate) fn poll_slack_ns(timeout_ns: u64, timer_slack_ns: u64) -> u64 {
    (timeout_ns / 1000).min(MAX_SLACK_NS).max(timer_slack_ns)
}

/// One wait of the sampler at `now`, all in cycles (`ms` cycles to a millisecond).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PollWait {
    /// The sampler's next slot (runtime.c `next`).
    pub slot: u64,
    /// When poll's timer fires, or None: a timeout of 0 ms, and poll returns at once.
    pub wake: Option<u64>,
}

/// runtime.c after a sample that took `span` and ended at `now`: `next += interval`, at least
/// `now + span`; poll for `ceil((next - now) / 1 ms)` ms. `slack` gives poll's slack, in
/// cycles, for a timeout in ns (`poll_slack_ns`, converted).
pub(crate) fn poll_wait(
    slot: u64,
    interval: u64,
    now: u64,
    span: u64,
    ms: u64,
    slack: impl Fn(u64) -> u64,
) -> PollWait {
    let slot = (slot + interval).max(now + span);
    let timeout_ms = (slot - now).div_ceil(ms.max(1));
    let wake = (timeout_ms > 0).then(|| now + timeout_ms * ms + slack(timeout_ms * 1_000_000));
    PollWait { slot, wake }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_is_a_thousandth_of_the_timeout_at_least_the_task_slack() {
        assert_eq!(poll_slack_ns(90_000_000, 50_000), 90_000);
        assert_eq!(poll_slack_ns(10_000_000, 50_000), 50_000);
        assert_eq!(poll_slack_ns(1_000_000_000_000, 50_000), MAX_SLACK_NS);
    }

    #[test]
    fn the_timeout_rounds_up_to_whole_milliseconds() {
        // A 10.39 ms sample after a slot at 0: 89.61 ms to the next slot, poll(90).
        let w = poll_wait(0, 100_000_000, 10_390_000, 10_390_000, 1_000_000, |t| {
            poll_slack_ns(t, 50_000)
        });
        assert_eq!(w.slot, 100_000_000);
        assert_eq!(w.wake, Some(10_390_000 + 90_000_000 + 90_000));
    }

    /// A sampler on a 1 GHz machine of its own: three samples of 10.39 ms, each wait as
    /// `wait` has it; returns when the last sample ends, ns.
    fn sampler_end(wait: crate::workload::Op) -> u64 {
        use crate::workload::{Mark, Op};
        let text = r#"
[machine]
cpus = 1
cpu_ghz = 1.0
[[machine.nodes]]
name = "dram"
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0"
[workload]
type = "test"
"#;
        let sample = [wait, Op::Compute(10_390_000)];
        let ops: Vec<Op> = (sample.iter().cycle().take(6).copied())
            .chain([Op::Mark(Mark::RoiEnd), Op::Exit])
            .collect();
        let sim = crate::sim::run_pinned_for_test(text, ops);
        sim.k.sched.threads[0].roi_end.unwrap()
    }

    #[test]
    fn the_sampler_wakes_a_whole_number_of_ms_after_each_sample_plus_polls_slack() {
        // Sample 1 at 0; poll(90) from 10.39 ms, woken at 100.48; slot 200 ms: poll(90) from
        // 110.87, woken at 200.96; the third sample ends at 211.35 ms.
        let end = sampler_end(crate::workload::Op::PollSlot(100_000_000));
        assert_eq!(end, 211_350_000);
        // On a fixed pacing schedule (slots at 0, 100 and 200 ms) it would end at 210.39 ms.
        assert_eq!(
            sampler_end(crate::workload::Op::Pace(100_000_000)),
            210_390_000
        );
    }

    #[test]
    fn a_long_sample_waits_its_own_span_and_a_slot_reached_does_not_wait() {
        let w = poll_wait(0, 100_000_000, 70_000_000, 70_000_000, 1_000_000, |_| 0);
        assert_eq!(w.slot, 140_000_000);
        assert_eq!(w.wake, Some(140_000_000));
        let w = poll_wait(0, 100_000_000, 100_000_000, 0, 1_000_000, |_| 0);
        assert_eq!(
            w,
            PollWait {
                slot: 100_000_000,
                wake: None
            }
        );
    }
}
