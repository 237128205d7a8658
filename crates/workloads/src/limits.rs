//! Bounds the workload tables share.

/// Most threads one workload may start: each holds a stream and a task in host memory, and
/// 65,536 is 256 per CPU on the largest machine tierlab models (256 CPUs).
pub const MAX_THREADS: u32 = 65_536;

/// The longest sleep or phase: sim.max_seconds' ceiling (1e6 s), so that sums of durations
/// in cycles stay far from u64's end.
pub const MAX_DURATION_MS: f64 = 1e9;

/// include/linux/threads.h PID_MAX_LIMIT on 64-bit: 4 * 1024 * 1024 tasks.
pub const PID_MAX_LIMIT: u64 = 4 * 1024 * 1024;

/// `Err` naming the range when `threads` is outside 1..=MAX_THREADS.
pub fn check_threads(threads: u32) -> Result<(), String> {
    if (1..=MAX_THREADS).contains(&threads) {
        Ok(())
    } else {
        Err(format!("{threads} is out of range (1..={MAX_THREADS})"))
    }
}
