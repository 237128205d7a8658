//! The NUMA scanner's trace (`sim.trace_numa_scan`): what the kernel's own probes show of
//! `task_numa_work`, so that `tierlab validate` can set a real kernel's scan beside tierlab's.
//! One event per `task_numa_work` entry and exit, per `change_prot_numa` call and per
//! `sched_skip_vma_numa` tracepoint (include/trace/events/sched.h, v6.7+). Recorded only when
//! switched on; scan passes are rare, so the cost is nil either way.

use serde::{Deserialize, Serialize};

/// Why `task_numa_work` passed over a VMA: the `reason` of `sched_skip_vma_numa`
/// (NUMAB_SKIP_*), named as the tracepoint prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NumabSkip {
    /// Not migratable, hugetlb or VM_MIXEDMAP.
    Unsuitable,
    /// A read-only file mapping (shared libraries, text).
    SharedRo,
    /// PROT_NONE by the program.
    Inaccessible,
    /// A new VMA within scan_delay of its first visit.
    ScanDelay,
    /// The scanning task took no hint fault in it lately (vma_is_accessed).
    PidInactive,
    /// Scanned although PID-inactive: a scan already under way inside it.
    IgnorePidInactive,
    /// Already scanned in this numa_scan_seq.
    SeqCompleted,
}

impl NumabSkip {
    pub const ALL: [NumabSkip; 7] = [
        NumabSkip::Unsuitable,
        NumabSkip::SharedRo,
        NumabSkip::Inaccessible,
        NumabSkip::ScanDelay,
        NumabSkip::PidInactive,
        NumabSkip::IgnorePidInactive,
        NumabSkip::SeqCompleted,
    ];

    /// The tracepoint's string for this reason.
    pub fn name(self) -> &'static str {
        match self {
            NumabSkip::Unsuitable => "unsuitable",
            NumabSkip::SharedRo => "shared_ro",
            NumabSkip::Inaccessible => "inaccessible",
            NumabSkip::ScanDelay => "scan_delay",
            NumabSkip::PidInactive => "pid_inactive",
            NumabSkip::IgnorePidInactive => "ignore_pid_inactive",
            NumabSkip::SeqCompleted => "seq_completed",
        }
    }

    pub fn from_name(s: &str) -> Option<NumabSkip> {
        NumabSkip::ALL.into_iter().find(|r| r.name() == s)
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NumaScanWhat {
    /// task_numa_work was entered (the task won mm->numa_next_scan).
    Work,
    /// task_numa_work returned.
    WorkDone,
    /// change_prot_numa over [start, end) made `updated` PTEs PROT_NONE.
    Chunk { start: u64, end: u64, updated: u64 },
    /// sched_skip_vma_numa for the VMA [start, end).
    Skip {
        start: u64,
        end: u64,
        reason: NumabSkip,
    },
}

/// One scanner event: when (ms since the start), on which thread (tierlab's thread number:
/// 0 is the process's main thread in scripted workloads), what.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NumaScanEvent {
    pub t_ms: f64,
    pub tid: usize,
    #[serde(flatten)]
    pub what: NumaScanWhat,
}
