//! The vmstat worker's pageset duties (mm/vmstat.c vmstat_update → refresh_cpu_vm_stats with
//! do_pagesets): once a second on each CPU, decay_pcp_high shrinks the CPU's per-CPU lists
//! towards high_min, and a list of a remote node that saw no activity for three updates is
//! drained a batch at a time (drain_zone_pages). The counters themselves are exact in tierlab,
//! so nothing is folded.
//!
//! Simplified: the work is deferrable (INIT_DEFERRABLE_WORK) and runs on an idle CPU only once
//! it wakes; here every CPU runs it on time. The kworker's time is not charged to the CPU (a
//! few µs a second); its zone-lock holds are.

use crate::kernel::{Event, Kernel, CONFIG_HZ};
use crate::machine::Machine;

/// sysctl_stat_interval: HZ jiffies, one second.
const STAT_INTERVAL_NS: f64 = 1e9;
/// "3 seconds idle till flush" (refresh_cpu_vm_stats): pcp->expire after a counter change.
const PCP_EXPIRE_UPDATES: u8 = 3;

impl Kernel {
    /// Arm each CPU's first vmstat update: round_jiffies_relative(HZ) lands on a whole second
    /// skewed 3 jiffies earlier per CPU (round_jiffies_common).
    pub fn start_vmstat_work(&mut self, hw: &Machine) {
        for c in 0..hw.cpus.len() {
            let skew_jiffies = (3 * c as u64) % CONFIG_HZ;
            let at = STAT_INTERVAL_NS - skew_jiffies as f64 * 1e9 / CONFIG_HZ as f64;
            self.schedule(hw.ns_to_cycles(at), Event::VmstatUpdate(c as u16));
        }
    }

    /// vmstat_update on `cpu` at `now`: for each node's zone, fold (a counter change re-arms
    /// the remote drain's expiry), decay_pcp_high, then the remote pageset's expiry; and the
    /// next update a second later.
    pub fn vmstat_update(&mut self, hw: &Machine, cpu: usize, now: u64) {
        let local = hw.cpus[cpu].node as usize;
        for n in 0..self.nodes.len() {
            let zone = &mut self.nodes[n].zone;
            if std::mem::take(&mut zone.pcp[cpu].stat_diff) {
                zone.pcp[cpu].expire = PCP_EXPIRE_UPDATES;
            }
            zone.decay_pcp_high(&mut self.frames, cpu, now, &hw.cost);
            let pcp = &mut zone.pcp[cpu];
            if pcp.expire == 0 || pcp.count == 0 {
                continue;
            }
            // We never drain zones local to this processor.
            if n == local {
                pcp.expire = 0;
                continue;
            }
            pcp.expire -= 1;
            if pcp.expire == 0 {
                zone.drain_zone_pages(&mut self.frames, cpu, now, &hw.cost);
            }
        }
        let next = now + hw.ns_to_cycles(STAT_INTERVAL_NS);
        self.schedule(next, Event::VmstatUpdate(cpu as u16));
    }
}
