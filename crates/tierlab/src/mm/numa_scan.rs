//! The NUMA scanner (`task_numa_work`, kernel/sched/fair.c, v6.7+): which VMAs a scan pass
//! visits. A new VMA waits `scan_delay`; a VMA already scanned in this `numa_scan_seq` is
//! skipped (and the offset moves past it); after its first two sequences a VMA is scanned only
//! if `vma_is_accessed` — the scanning task took a hint fault in it during the last two
//! 4 × `scan_delay` windows (`pids_active`), a scan is already under way inside it, or it has
//! not been scanned for more sequences than the process has threads — otherwise it waits for
//! the forced one-VMA retry when nothing else is left. The 256 MB budget is spent only on
//! chunks that changed a PTE.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::numa_placement::HZ;
use crate::mm::numa_scan_trace::{NumaScanEvent, NumaScanWhat, NumabSkip};
use crate::mm::pgtable::PAGE_SHIFT;
use crate::workload::{prot, Backing};

/// struct vma_numab_state, with jiffies kept in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmaNumabState {
    /// No scan before this time (a new VMA waits scan_delay).
    pub next_scan_ms: u64,
    /// When pids_active rotates next (every 4 × scan_delay).
    pub pids_active_reset_ms: u64,
    /// Hashed PIDs of tasks that took hint faults here: [older window, current window].
    pub pids_active: [u64; 2],
    /// mm->numa_scan_seq when the state was made, and when the VMA was last fully scanned.
    pub start_scan_seq: u32,
    pub prev_scan_seq: u32,
}

/// What vma_is_accessed decided for the scanning task.
enum VmaAccess {
    /// Scan it: an early sequence, a hint fault of this task, or long unscanned.
    Accessed,
    /// Scan it only because a scan is under way inside it (traced as ignore_pid_inactive).
    ScanUnderWay,
    /// Skip it (pid_inactive).
    Inactive,
}

/// hash_32(pid, ilog2(BITS_PER_LONG)): the task's bit in pids_active.
fn pid_bit(tid: usize) -> u64 {
    // A thread's pid: tierlab numbers them from 1 in creation order.
    let pid = tid as u32 + 1;
    1u64 << (pid.wrapping_mul(0x61C8_8647) >> (32 - 6))
}

impl Kernel {
    /// Record a scanner event at CPU `c`'s time, when `sim.trace_numa_scan` is on.
    fn trace_numa_scan(&mut self, m: &Machine, c: usize, tid: usize, what: NumaScanWhat) {
        self.trace_numa_scan_at(m, m.cpus[c].clock, tid, what);
    }

    /// Record a scanner event at time `t` (cycles).
    fn trace_numa_scan_at(&mut self, m: &Machine, t: u64, tid: usize, what: NumaScanWhat) {
        if let Some(trace) = self.numa_scan_trace.as_mut() {
            let t_ms = t as f64 / (m.cycles_per_ns * 1e6);
            trace.push(NumaScanEvent { t_ms, tid, what });
        }
    }

    /// trace_sched_skip_vma_numa.
    fn trace_skip(&mut self, m: &Machine, c: usize, tid: usize, vma: (u64, u64), why: NumabSkip) {
        let (start, end) = vma;
        let what = NumaScanWhat::Skip {
            start,
            end,
            reason: why,
        };
        self.trace_numa_scan(m, c, tid, what);
    }

    /// vma_set_access_pid_bit: a hint fault by `tid` in the VMA at `vpn`.
    pub(crate) fn vma_set_access_pid_bit(&mut self, mm: usize, vpn: u32, tid: usize) {
        let addr = (vpn as u64) << PAGE_SHIFT;
        let space = &mut self.mms[mm];
        let i = space.vma_index_from(addr);
        if let Some(st) = space.vmas.get_mut(i).and_then(|v| v.numab.as_mut()) {
            st.pids_active[1] |= pid_bit(tid);
        }
    }

    /// vma_is_accessed for the scanning task `tid`.
    fn vma_is_accessed(
        &self,
        mm: usize,
        st: &VmaNumabState,
        vma_start: u64,
        tid: usize,
    ) -> VmaAccess {
        let numa = &self.mms[mm].numa;
        // Scan unconditionally the first two times.
        if numa.scan_seq.wrapping_sub(st.start_scan_seq) < 2 {
            return VmaAccess::Accessed;
        }
        if (st.pids_active[0] | st.pids_active[1]) & pid_bit(tid) != 0 {
            return VmaAccess::Accessed;
        }
        // Complete a scan that has already started inside this VMA.
        if numa.scan_offset > vma_start {
            return VmaAccess::ScanUnderWay;
        }
        // Not scanned for long and few threads to help: scan it.
        let nr_threads = self.mms[mm].nr_threads;
        if numa.scan_seq > st.prev_scan_seq + nr_threads {
            VmaAccess::Accessed
        } else {
            VmaAccess::Inactive
        }
    }

    /// task_numa_work run by thread `tid` on CPU `c`: mark up to scan_size MB of PTEs
    /// PROT_NONE in the VMAs this task may scan, continuing where the last pass stopped.
    pub fn task_numa_work(&mut self, m: &mut Machine, c: usize, tid: usize) {
        let mm = self.sched.threads[tid].mm as usize;
        let now = m.cpus[c].clock;
        let now_ms = m.now_ms(c);
        let period = self.sched.threads[tid].numa_scan_period_ms;
        self.mms[mm].numa.next_scan = now + m.ns_to_cycles(period as f64 * 1e6);
        // Delay this task enough that another task of this mm likely wins next time.
        self.sched.threads[tid].numa_node_stamp += m.ns_to_cycles(2e9 / HZ as f64);
        self.trace_numa_scan(m, c, tid, NumaScanWhat::Work);
        self.task_numa_work_vmas(m, c, tid, mm, now_ms);
        self.trace_numa_scan(m, c, tid, NumaScanWhat::WorkDone);
    }

    /// The VMA walk of task_numa_work from mm->numa_scan_offset on: `pages` is spent on
    /// chunks that changed a PTE, `virtpages` on every chunk.
    fn task_numa_work_vmas(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        mm: usize,
        now_ms: u64,
    ) {
        let scan_delay = self.cfg.kernel.numa_balancing_scan_delay_ms;
        let mut pages = (self.cfg.kernel.numa_balancing_scan_size_mb << (20 - PAGE_SHIFT)) as i64;
        let mut virtpages = pages * 8;
        let mut pids_skipped = false;
        let mut pids_forced = false;
        const HPAGE: u64 = 2 << 20;
        'retry: loop {
            let mut start = self.mms[mm].numa.scan_offset;
            let mut i = self.mms[mm].vma_index_from(start);
            if i >= self.mms[mm].vmas.len() {
                self.reset_ptenuma_scan(mm);
                start = 0;
                i = 0;
            }
            while i < self.mms[mm].vmas.len() {
                let vma = self.mms[mm].vmas[i];
                i += 1;
                let readonly_file = matches!(vma.backing, Backing::File { .. }) && !vma.writable();
                let accessible = vma.prot & (prot::READ | prot::WRITE | prot::EXEC) != 0;
                if readonly_file || !accessible {
                    let why = if readonly_file {
                        NumabSkip::SharedRo
                    } else {
                        NumabSkip::Inaccessible
                    };
                    self.trace_skip(m, c, tid, (vma.start, vma.end), why);
                    continue;
                }
                let seq = self.mms[mm].numa.scan_seq;
                let st = *self.mms[mm].vmas[i - 1].numab.get_or_insert(VmaNumabState {
                    start_scan_seq: seq,
                    next_scan_ms: now_ms + scan_delay,
                    pids_active_reset_ms: now_ms + 5 * scan_delay,
                    prev_scan_seq: seq.wrapping_sub(1),
                    pids_active: [0; 2],
                });
                // A new VMA waits scan_delay (short-lived tasks' VMAs cost more to scan).
                if seq > 0 && now_ms < st.next_scan_ms {
                    self.trace_skip(m, c, tid, (vma.start, vma.end), NumabSkip::ScanDelay);
                    continue;
                }
                // Rotate the access PIDs of old VMAs every 4 × scan_delay.
                if seq > 0 && now_ms > st.pids_active_reset_ms {
                    let s = self.mms[mm].vmas[i - 1].numab.as_mut().expect("made above");
                    s.pids_active_reset_ms += 4 * scan_delay;
                    s.pids_active = [s.pids_active[1], 0];
                }
                // Do not rescan a VMA within the same sequence.
                if st.prev_scan_seq == seq {
                    self.mms[mm].numa.scan_offset = vma.end;
                    self.trace_skip(m, c, tid, (vma.start, vma.end), NumabSkip::SeqCompleted);
                    continue;
                }
                let st = self.mms[mm].vmas[i - 1].numab.expect("made above");
                if !pids_forced {
                    match self.vma_is_accessed(mm, &st, vma.start, tid) {
                        VmaAccess::Inactive => {
                            pids_skipped = true;
                            let why = NumabSkip::PidInactive;
                            self.trace_skip(m, c, tid, (vma.start, vma.end), why);
                            continue;
                        }
                        VmaAccess::ScanUnderWay => {
                            let why = NumabSkip::IgnorePidInactive;
                            self.trace_skip(m, c, tid, (vma.start, vma.end), why);
                        }
                        VmaAccess::Accessed => {}
                    }
                }
                let mut s = start.max(vma.start);
                loop {
                    let e = ((s + pages as u64 * 4096).div_ceil(HPAGE) * HPAGE).min(vma.end);
                    let chunk = ((e - s) >> PAGE_SHIFT) as i64;
                    let t0 = m.cpus[c].clock;
                    let n = self.change_prot_numa(
                        m,
                        c,
                        mm,
                        (s >> PAGE_SHIFT) as u32,
                        (e >> PAGE_SHIFT) as u32,
                    );
                    // Stamped at the call, as the kprobe on change_prot_numa sees it.
                    let what = NumaScanWhat::Chunk {
                        start: s,
                        end: e,
                        updated: n,
                    };
                    self.trace_numa_scan_at(m, t0, tid, what);
                    if n > 0 {
                        pages -= chunk;
                    }
                    virtpages -= chunk;
                    s = e;
                    if pages <= 0 || virtpages <= 0 {
                        self.mms[mm].numa.scan_offset = s;
                        return;
                    }
                    if e == vma.end {
                        break;
                    }
                }
                start = vma.end;
                // The VMA is fully scanned: not again until the next sequence.
                if let Some(st) = self.mms[mm].vmas[i - 1].numab.as_mut() {
                    st.prev_scan_seq = seq;
                }
                // Force-scan only one VMA at a time.
                if pids_forced {
                    self.mms[mm].numa.scan_offset = start;
                    return;
                }
            }
            // No VMA left and some were skipped for PID inactivity: force one.
            if !pids_forced && pids_skipped {
                pids_forced = true;
                continue 'retry;
            }
            break;
        }
        // Reached the end of the address space: start over next time.
        self.reset_ptenuma_scan(mm);
    }

    /// reset_ptenuma_scan: a new sequence from the start of the address space.
    fn reset_ptenuma_scan(&mut self, mm: usize) {
        let numa = &mut self.mms[mm].numa;
        numa.scan_seq += 1;
        numa.scan_offset = 0;
    }
}
